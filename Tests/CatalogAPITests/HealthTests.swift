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
    @Test func backupsAreWrittenBesideTheDatabaseOneAtATimeAndPruned() async throws {
        let catalog = try TestCatalog { $0.backupKeep = 2 }
        let folder = catalog.directory.appendingPathComponent("backups")
        var names: [String] = []
        for _ in 0..<3 {
            let response = try await catalog.client.send("POST", "/admin/backups")
            #expect(response.status == 201)
            let created = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            #expect(Set(created.keys) == ["name", "bytes", "integrityCheck"], "no server path in the answer")
            let name = try #require(created["name"] as? String)
            #expect(!name.contains("/"))
            #expect(created["integrityCheck"] as? String == "ok")
            names.append(name)
        }
        // The newest two are kept.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == Array(names.suffix(2)).sorted())
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
