import CatalogModels
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
import CatalogStore
#endif

/// `Idempotency-Key` on POST: one write per key, replayed answers, kept across restarts.
@Suite struct IdempotencyTests {
    @Test(arguments: TestEngine.all) func aRetriedPostIsAppliedOnceAndReplayed(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
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
    }

    // A backup is the long-running write this needs: SQLite only.
    // SQLite only.
    @Test func aDuplicateWhileTheFirstRunsIsAConflict() async throws {
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

    /// The answer is kept in the transaction of the write it answers: a server killed at
    /// any moment, on either engine, leaves each keyed request applied once, and a retry of
    /// every one of them after the restart (acknowledged or not) makes nothing twice.
    @Test(arguments: TestEngine.all) func keyedPostsRetriedAfterKill9ExistOnce(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-keyed-kill-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer {
                if !TestEngine.isSQLite { TestEngine.release(directory) }
                try? FileManager.default.removeItem(at: directory)
            }
            let database = TestEngine.isSQLite ? directory.appendingPathComponent("catalog.sqlite").path : try TestEngine.postgresDatabase(for: directory)
            let key = try await Executables.bootstrapKey(database: database)
            let arguments = ["--database", database, "--migrations", migrationsDirectory.path, "--no-seed", "--rate-limits", "off"]
            let first = try await ServerProcess(arguments, log: directory.appendingPathComponent("first.log"), key: key)
            // Every request is noted before it is sent; an acknowledged one with its Location.
            final class Notes: Sendable {
                let attempted = Mutex<[String]>([])
                let acknowledged = Mutex<[String: String]>([:])
            }
            let notes = Notes()
            let workers = (0..<6).map { worker in
                Task {
                    for index in 0..<400 {
                        let name = "K\(worker)-\(index)"
                        notes.attempted.withLock { $0.append(name) }
                        guard
                            let response = try? await first.client.send(
                                "POST", "/v1/games", json: ["name": name, "imageName": "k"],
                                headers: ["Idempotency-Key": name]), response.status == 201
                        else { return }
                        notes.acknowledged.withLock { $0[name] = response.header("Location") }
                    }
                }
            }
            for _ in 0..<200 where notes.acknowledged.withLock({ $0.count }) < 150 { try await Task.sleep(for: .milliseconds(20)) }
            try await onThread { first.kill9() }
            for worker in workers { await worker.value }
            let second = try await ServerProcess(arguments, log: directory.appendingPathComponent("second.log"), key: key)
            for name in notes.attempted.withLock({ $0 }) {
                let retried = try await second.client.send("POST", "/v1/games", json: ["name": name, "imageName": "k"], headers: ["Idempotency-Key": name])
                #expect(retried.status == 201, "\(name): \(retried.status) \(retried.text)")
                if let location = notes.acknowledged.withLock({ $0[name] }) {
                    #expect(retried.header("Location") == location, "an acknowledged request is replayed")
                }
            }
            let names = try await second.client.all("/v1/games?limit=100", as: Game.self).map(\.name)
            #expect(names.count == Set(names).count, "no game twice: \(names.count - Set(names).count) duplicates")
            #expect(Set(names) == Set(notes.attempted.withLock { $0 }))
        }
    }
}
