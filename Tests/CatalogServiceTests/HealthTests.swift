import Foundation
import HTTPServer
import Testing
@testable import CatalogService
@testable import CatalogStore

/// `/healthz` and `/readyz`.
@Suite struct HealthTests {
    @Test func livenessAndReadiness() async throws {
        let catalog = try TestCatalog(seed: false)
        let live = try await catalog.client.get("/healthz")
        #expect(live.status == 200)
        #expect(live.text == "ok")
        let ready = try await catalog.client.get("/readyz")
        #expect(ready.status == 200)
        #expect(ready.text == "ready")
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

    @Test func readinessIsFalseWhenMigrationsArePending() throws {
        let catalog = try TestCatalog(seed: false)
        let current = try Migration.load(from: migrationsDirectory)
        #expect(catalog.application.store.isReady(migrations: current))
        let newer = Migration(version: 9999, fileName: "9999_future.sql", sql: "SELECT 1;", checksum: "")
        #expect(catalog.application.store.isReady(migrations: current + [newer]) == false)
    }
}

/// `POST /admin/backups`.
@Suite struct BackupEndpointTests {
    @Test func backupsAreWrittenBesideTheDatabase() async throws {
        let catalog = try TestCatalog()
        let response = try await catalog.client.send("POST", "/admin/backups")
        #expect(response.status == 201)
        let created = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
        let path = try #require(created["path"] as? String)
        #expect(path.hasPrefix(catalog.directory.appendingPathComponent("backups").path))
        #expect(created["integrityCheck"] as? String == "ok")
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(try await catalog.client.send("GET", "/admin/backups").status == 405)
    }
}
