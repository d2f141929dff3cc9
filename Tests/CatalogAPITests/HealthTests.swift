import CatalogIdentity
import CatalogModels
import Foundation
import HTTPServer
import ServiceTestSupport
import TestSupport
import Testing

@testable import CatalogService
@testable import CatalogStore

/// `/healthz` and `/readyz`.
@Suite struct HealthTests {
    @Test(arguments: TestEngine.all) func livenessAndReadiness(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let live = try await catalog.client.get("/healthz")
            #expect(live.status == 200)
            #expect(live.text == "ok")
            let ready = try await catalog.client.get("/readyz")
            #expect(ready.status == 200)
            #expect(ready.text == "ready")
        }
    }

    @Test func notReadyWhileDrainingOrWithoutTheDatabase() throws {
        for (draining, databaseReady) in [(true, true), (false, false)] {
            #expect(throws: APIError.self) { try Health.readiness(draining: draining, databaseReady: databaseReady) }
            do {
                _ = try Health.readiness(draining: draining, databaseReady: databaseReady)
            } catch {
                let response = ErrorMapping.render(error, context: ErrorContext(path: "/readyz", requestID: "r"))
                #expect(response.status.code == 503)
                #expect(response.headers.contains { $0.name == "Retry-After" })
            }
        }
        #expect((try? Health.readiness(draining: false, databaseReady: true))?.status.code == 200)
    }

    @Test(arguments: TestEngine.all) func readinessIsFalseWhenMigrationsArePending(_ engine: DatabaseEngine) throws {
        try TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let current = try Migration.load(from: migrationsDirectory, for: TestEngine.engine)
            #expect(catalog.application.store.isReady(migrations: current))
            let newer = Migration(version: 9999, fileName: "9999_future.sql", sql: "SELECT 1;", checksum: "")
            #expect(catalog.application.store.isReady(migrations: current + [newer]) == false)
        }
    }
}

/// `POST /admin/backups`.
@Suite struct BackupEndpointTests {
    @Test(.enabled(if: TestEngine.all.contains(.postgresql), "needs CATALOG_TEST_POSTGRES_URL")) func backupsAreNotOfferedOnPostgreSQL() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog()
            let response = try await catalog.client.send("POST", "/admin/backups")
            #expect(response.status == 501)
            let problem = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            #expect(problem["code"] as? String == "backupsNotOffered")
            #expect((problem["detail"] as? String)?.contains("pg_dump") == true)
        }
    }

    // SQLite only.
    @Test func aBackupHoldsTheImagesItShowsAndARestorePutsThemBack() async throws {
        let catalog = try TestCatalog(seed: false)
        let game = try await catalog.client.send("POST", "/v1/games", json: ["name": "G", "imageName": "g"]).decode(Game.self)
        let shown = try await catalog.client.send(
            "PUT", "/v1/games/\(game.id)/image", headers: ["Content-Type": "image/png"], body: Data(TestImages.png(width: 12, height: 12)))
        let image = try #require(try shown.decode(Game.self).image)
        let created = try await catalog.client.send("POST", "/admin/backups").decode(Backup.self)
        #expect(created.images == 1)
        let backup = catalog.directory.appendingPathComponent("backups").appendingPathComponent(created.name).path
        let media = CatalogApplication.backupMediaFolder(of: backup)
        #expect(FileManager.default.fileExists(atPath: media + "/originals/" + image.hash))
        // Restored elsewhere: the database's image is there again.
        let elsewhere = catalog.directory.appendingPathComponent("restored-media").path
        #expect(try CatalogApplication.restoreImages(from: backup, to: elsewhere) == 1)
        let restored = try Data(contentsOf: URL(fileURLWithPath: elsewhere + "/originals/" + image.hash))
        #expect(Crypto.hex(Crypto.sha256(Array(restored))) == image.hash)
        #expect(try CatalogApplication.restoreImages(from: catalog.directory.appendingPathComponent("none.sqlite").path, to: elsewhere) == nil)
    }

    // SQLite only.
    @Test func aBackupHoldsTheHostedVideosAndARestorePutsThemBack() async throws {
        let catalog = try TestCatalog(seed: false)
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Kept", streamURL: URL(string: "https://example.com/k")!)).value.id
        let clip = try Data(contentsOf: try await TestVideos.clip(seconds: 1, width: 160, height: 90, audio: false))
        #expect(try await catalog.client.send("POST", "/v1/playable-items/\(item)/video", headers: ["Content-Type": "application/octet-stream"], body: clip).status == 201)
        try await catalog.processVideos()
        let video = try #require(try await catalog.client.get("/v1/playable-items/\(item)").decode(PlayableItem.self).video)
        let created = try await catalog.client.send("POST", "/admin/backups").decode(Backup.self)
        #expect(created.videos == 1 && created.images == 1, "the video, and its poster")
        let backup = catalog.directory.appendingPathComponent("backups").appendingPathComponent(created.name).path
        let elsewhere = catalog.directory.appendingPathComponent("restored-media").path
        #expect(try CatalogApplication.restoreVideos(from: backup, to: elsewhere) == 1)
        let source = try Data(contentsOf: URL(fileURLWithPath: elsewhere + "/videos/\(video.id)/source"))
        #expect(source == clip)
        #expect(FileManager.default.fileExists(atPath: elsewhere + "/videos/\(video.id)/media/master.m3u8"))
        #expect(FileManager.default.fileExists(atPath: elsewhere + "/videos/\(video.id)/media/90p/index.m3u8"))
    }

    @Test func backupsAreWrittenBesideTheDatabaseOneAtATimeAndPruned() async throws {
        let catalog = try TestCatalog { $0.backupKeep = 2 }
        let folder = catalog.directory.appendingPathComponent("backups")
        var names: [String] = []
        for _ in 0..<3 {
            let response = try await catalog.client.send("POST", "/admin/backups")
            #expect(response.status == 201)
            let created = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            #expect(Set(created.keys) == ["name", "bytes", "integrityCheck", "images", "videos"], "no server path in the answer")
            let name = try #require(created["name"] as? String)
            #expect(!name.contains("/"))
            #expect(created["integrityCheck"] as? String == "ok")
            names.append(name)
        }
        // The newest two are kept, with their images.
        let kept = names.suffix(2).flatMap { [$0, CatalogApplication.backupMediaFolder(of: $0)] }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == kept.sorted())
        #expect(try await catalog.client.send("GET", "/admin/backups").status == 405)

        // Two at once: one is written, the other is refused while it runs.
        let port = catalog.client.baseURL.port ?? 0
        let key = catalog.adminKey
        let statuses = try await onThread { () -> [String] in
            let first = try Loopback.connect(port: port), second = try Loopback.connect(port: port)
            defer { close(first); close(second) }
            for (fd, token) in [(first, "a"), (second, "b")] {
                let request = Array("POST /admin/backups HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(key)\r\nIdempotency-Key: \(token)\r\nContent-Length: 0\r\n\r\n".utf8)
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            return [first, second].map { fd in
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(fd, &buffer, 4096, 0)
                return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
            }
        }
        #expect(statuses.filter { $0.hasPrefix("HTTP/1.1 201") }.count == 1)
        #expect(statuses.filter { $0.hasPrefix("HTTP/1.1 409") && $0.contains("backupInProgress") }.count == 1)
    }
}
