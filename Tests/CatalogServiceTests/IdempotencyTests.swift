import CatalogModels
import Foundation
import Testing
import TestSupport

/// `Idempotency-Key` on POST: one write per key, replayed answers, kept across restarts.
@Suite struct IdempotencyTests {
    @Test func aRetriedPostIsAppliedOnceAndReplayed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tests-\(UUID().uuidString)")
        let catalog = try TestCatalog(seed: false, databaseDirectory: directory)
        let key = ["Idempotency-Key": "\"order-7f3a\""]
        let first = try await catalog.client.send("POST", "/v1/games", json: ["name": "Once", "imageName": "once"], headers: key)
        #expect(first.status == 201)
        let again = try await catalog.client.send("POST", "/v1/games", json: ["name": "Once", "imageName": "once"], headers: key)
        #expect(again.status == 201)
        #expect(again.body == first.body)
        #expect(again.header("Location") == first.header("Location"))
        #expect(again.header("ETag") == first.header("ETag"))
        #expect(try await catalog.client.all("/v1/games", as: Game.self).count == 1, "no second write")

        // The same key with another body is refused; a malformed key is a 400.
        let other = try await catalog.client.send("POST", "/v1/games", json: ["name": "Twice", "imageName": "once"], headers: key)
        #expect(other.status == 422)
        #expect(try other.decode(Problem.self).code == "idempotencyKeyReused")
        let bad = try await catalog.client.send("POST", "/v1/games", json: ["name": "Bad", "imageName": "b"], headers: ["Idempotency-Key": ""])
        #expect(bad.status == 400)
        // Another caller's identical key is its own.
        let member = try catalog.user("Mia", role: .editor)
        let theirs = try await catalog.client(key: member.key).send("POST", "/v1/games", json: ["name": "Once", "imageName": "once"], headers: key)
        #expect(theirs.status == 201)
        #expect(theirs.header("Location") != first.header("Location"))

        // Kept in the database: a restarted server still replays it.
        try catalog.stop()
        let reopened = try TestCatalog(seed: false, databaseDirectory: directory)
        let afterRestart = try await reopened.client(key: catalog.adminKey)
            .send("POST", "/v1/games", json: ["name": "Once", "imageName": "once"], headers: key)
        #expect(afterRestart.status == 201)
        #expect(afterRestart.header("Location") == first.header("Location"))
        #expect(try await reopened.client.all("/v1/games", as: Game.self).count == 2)
    }

    // A backup is the long-running write this needs: SQLite only.
    @Test(.enabled(if: TestEngine.isSQLite)) func aDuplicateWhileTheFirstRunsIsAConflict() async throws {
        let catalog = try TestCatalog(seed: true)
        let port = catalog.client.baseURL.port ?? 0
        let request = Array("POST /admin/backups HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(catalog.adminKey)\r\nIdempotency-Key: b-1\r\nContent-Length: 0\r\n\r\n".utf8)
        let statuses = try await onThread { () -> [String] in
            // Both sent before either is answered: the backup takes far longer than the second's arrival.
            let first = try Loopback.connect(port: port), second = try Loopback.connect(port: port)
            defer { close(first); close(second) }
            for fd in [first, second] {
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            return [first, second].map { fd in
                var buffer = [UInt8](repeating: 0, count: 12)
                let count = recv(fd, &buffer, 12, Int32(MSG_WAITALL))
                return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
            }
        }
        #expect(statuses.sorted() == ["HTTP/1.1 201", "HTTP/1.1 409"])
    }
}
