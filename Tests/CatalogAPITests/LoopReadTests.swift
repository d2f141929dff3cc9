import CatalogModels
import Foundation
import HTTPServer
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import CatalogService
@testable import CatalogStore

/// On PostgreSQL, a GET of one resource is sent from the event loop over the loop's own
/// non-blocking connections (`catalog-loop-reads` in `pg_stat_activity`): answers are the
/// very bytes the database pool's path gives, under more requests at once than the loop
/// has connections; a connection lost while idle or mid-read costs no request its answer;
/// and closing the store closes them.
@Suite struct LoopReadTests {
    /// A GET over its own connection, `Connection: close`: the raw answer.
    private static func get(_ port: Int, _ path: String) throws -> String {
        try Loopback.blockingExchange(port: port, Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
    }

    /// The body and `ETag` of a raw answer, and its status.
    private static func parts(_ answer: String) -> (status: Int, etag: String?, body: String) {
        let split = answer.components(separatedBy: "\r\n\r\n")
        let head = split.first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        let etag = head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("etag:") }.map { String($0.dropFirst(5)).trimmingCharacters(in: .whitespaces) }
        return (status, etag, split.dropFirst().joined(separator: "\r\n\r\n"))
    }

    /// The sessions of the loops' connections to the test's database.
    private static func loopSessions(_ url: String, where condition: String = "true") throws -> Int64 {
        try PostgresAdmin.integer(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'catalog-loop-reads' AND datname = current_database() AND \(condition)", at: url)
            ?? -1
    }

    /// Whether `condition` held within ten seconds, asked every few milliseconds.
    @discardableResult
    private static func poll(_ condition: () throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    private static func postgresURL(_ catalog: TestCatalog) throws -> String {
        guard case let .postgresql(url) = catalog.application.store.location else { throw Loopback.Failure(description: "not on PostgreSQL") }
        return url
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func manyGetsAtOnceGetTheBytesThePoolGives() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            var created: [CatalogID] = []
            for index in 0..<48 {
                created.append(
                    try await catalog.api.playableItems.create(PlayableItemInput(title: "Item \(index)", streamURL: URL(string: "https://example.com/\(index)")!)).value.id)
            }
            let ids = created
            // What the pool gives (a request answered in process has no loop).
            var expected: [CatalogID: (etag: String?, body: String)] = [:]
            for id in ids {
                let answer = try await catalog.inProcess.get("/v1/playable-items/\(id)")
                #expect(answer.status == 200)
                expected[id] = (answer.header("ETag"), String(decoding: answer.body, as: UTF8.self))
            }
            #expect(catalog.application.store.loopReads.taken == 0, "in process, nothing is read from a loop")
            // One at a time until the loop has a connection (reads go to the pool while it connects)...
            while catalog.application.store.loopReads.connections == 0 {
                let got = Self.parts(try await onThread { try Self.get(port, "/v1/playable-items/\(ids[0])") })
                #expect(got.status == 200 && got.body == expected[ids[0]]?.body)
            }
            let before = catalog.application.store.loopReads
            // ...then all 48 at once, twice: more than it has connections, every one taken.
            for _ in 0..<2 {
                let answers = try await withThrowingTaskGroup(of: (CatalogID, String).self) { group in
                    for id in ids { group.addTask { (id, try await onThread { try Self.get(port, "/v1/playable-items/\(id)") }) } }
                    return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
                }
                for id in ids {
                    let got = Self.parts(answers[id] ?? "")
                    #expect(got.status == 200 && got.etag == expected[id]?.etag && got.body == expected[id]?.body, "\(id): \(answers[id] ?? "")")
                }
            }
            // An absent one is a 404 from the loop too.
            let absent = Self.parts(try await onThread { try Self.get(port, "/v1/playable-items/\(CatalogID())") })
            #expect(absent.status == 404 && absent.body.contains("\"notFound\""))
            let counts = catalog.application.store.loopReads
            #expect(counts.taken == before.taken + 97 && counts.declined == before.declined && counts.handedBack == 0, "\(counts)")
            #expect((1...PostgresLoopReader.connectionsPerLoop).contains(counts.connections), "\(counts)")
            // The metrics say so.
            let metrics = String(decoding: try await catalog.inProcess.get("/metrics").body, as: UTF8.self)
            #expect(metrics.contains("catalog_db_loop_reads_total{outcome=\"taken\"} \(counts.taken)"))
            // Closing the store closes the loops' connections.
            let url = try Self.postgresURL(catalog)
            // (A session names itself before the loop counts it: the two agree once it is counted.)
            #expect(try await Self.poll { try Self.loopSessions(url) == Int64(catalog.application.store.loopReads.connections) })
            try catalog.stop()
            #expect(try await Self.poll { try Self.loopSessions(url) == 0 }, "the loops' sessions end with the store")
        }
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aLostConnectionCostsNoRequestItsAnswer() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let url = try Self.postgresURL(catalog)
            let id = try await catalog.api.playableItems.create(PlayableItemInput(title: "Kept", streamURL: URL(string: "https://example.com/k")!)).value.id
            let path = "/v1/playable-items/\(id)"
            let expected = String(decoding: try await catalog.inProcess.get(path).body, as: UTF8.self)
            // Until the loop has a connection (the first reads go to the pool while it connects).
            for _ in 0..<400 where catalog.application.store.loopReads.connections == 0 {
                #expect(Self.parts(try await onThread { try Self.get(port, path) }).body == expected)
            }
            #expect(catalog.application.store.loopReads.connections >= 1)

            // Killed while idle: the next reads are answered all the same, and it is made again.
            _ = try PostgresAdmin.integer(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'catalog-loop-reads' AND datname = current_database()",
                at: url)
            let opened = catalog.application.store.loopReads.connections
            for _ in 0..<400 where catalog.application.store.loopReads.connections == opened {
                let got = Self.parts(try await onThread { try Self.get(port, path) })
                #expect(got.status == 200 && got.body == expected)
            }
            #expect(catalog.application.store.loopReads.connections > opened, "a connection made again")

            // Killed mid-read: the read is handed to the pool and answered from there. The
            // read is held by a lock on the table, under a loop read's statement timeout
            // (one second): on a machine so loaded that the steps below take longer, it times
            // out first, and the scenario is run again.
            var handedBack = false
            for _ in 0..<5 where !handedBack {
                let before = catalog.application.store.loopReads.handedBack
                let holder = Task {
                    try? await onThread {
                        try PostgresAdmin.run("BEGIN; LOCK TABLE playable_items IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT", at: url)
                    }
                }
                let holding = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid() AND state = 'active'"
                try await Self.poll { try PostgresAdmin.integer(holding, at: url) == 1 }
                let answer = Task { try await onThread { try Self.get(port, path) } }
                try await Self.poll { try Self.loopSessions(url, where: "wait_event_type = 'Lock'") > 0 }
                _ = try PostgresAdmin.integer(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'catalog-loop-reads' AND datname = current_database() AND wait_event_type = 'Lock'",
                    at: url)
                // The pool's read waits for the lock in turn; then the lock goes.
                let poolWaiting =
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name <> 'catalog-loop-reads'"
                try await Self.poll { try PostgresAdmin.integer(poolWaiting, at: url) ?? 0 > 0 }
                _ = try PostgresAdmin.integer(
                    "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()", at: url)
                await holder.value
                let got = Self.parts(try await answer.value)
                handedBack = catalog.application.store.loopReads.handedBack > before
                if handedBack {
                    #expect(got.status == 200 && got.body == expected, "\(got)")
                } else {
                    // Timed out on the loop first: answered as an over-long read is.
                    #expect(got.status == 503, "\(got)")
                }
            }
            #expect(handedBack, "a read lost mid-way is handed to the pool")
        }
    }
}
