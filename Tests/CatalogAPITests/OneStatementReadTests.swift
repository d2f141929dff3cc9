import CatalogModels
import Foundation
import ServiceTestSupport
import Testing

@testable import CatalogStore

/// On PostgreSQL, a read that is mostly one statement (a search) runs it alone, outside a
/// transaction (no `BEGIN` and `COMMIT`, two round trips); a read that runs a second
/// statement runs again, whole, in a snapshot. Told apart by the isolation level each
/// statement runs at: `read committed` alone (the readers' setting), `repeatable read` in
/// the snapshot; and by the transaction each statement runs in.
@Suite struct OneStatementReadTests {
    private static let isolation = "SELECT current_setting('transaction_isolation')"

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aReadOfOneStatementRunsAloneAndMoreRunAgainInASnapshot() throws {
        try TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            defer { try? catalog.stop() }
            let database = catalog.application.store.database
            let reruns = { (database as? PostgresDatabase)?.snapshotReruns.load(ordering: .relaxed) ?? -1 }
            var runs = 0
            // One statement: alone, once.
            let alone = try database.oneStatementSnapshot { db in
                runs += 1
                return try db.fetchValue(Self.isolation).string
            }
            #expect(alone == "read committed")
            #expect(runs == 1)
            #expect(reruns() == 0)
            // None: once.
            runs = 0
            try database.oneStatementSnapshot { _ in runs += 1 }
            #expect(runs == 1)
            // Two statements: the second is refused, and the whole read runs again in one
            // snapshot (one transaction: the same `txid_current()` twice).
            runs = 0
            let both = try database.oneStatementSnapshot { db in
                runs += 1
                return [try db.fetchValue(Self.isolation).string, try db.fetchValue("SELECT txid_current() = txid_current()::text::bigint").int64.map(String.init)]
            }
            #expect(both == ["repeatable read", "1"])
            #expect(runs == 2)
            #expect(reruns() == 1)
            // A read that swallows the refusal runs again all the same; so does one that
            // asks to execute (which could change the session).
            runs = 0
            let swallowed = try database.oneStatementSnapshot { db in
                runs += 1
                let first = try db.fetchValue(Self.isolation).string
                _ = try? db.fetchValue("SELECT 1")
                return first
            }
            #expect(swallowed == "repeatable read")
            #expect(runs == 2)
            runs = 0
            let executed = try database.oneStatementSnapshot { db in
                runs += 1
                return try db.execute("SET LOCAL lock_timeout = '1s'", [])
            }
            #expect(executed == 0)
            #expect(runs == 2)
            #expect(reruns() == 3)
            // A failing statement fails once: not run again.
            runs = 0
            do {
                _ = try database.oneStatementSnapshot { db in
                    runs += 1
                    return try db.fetchValue("SELECT * FROM no_such_table")
                }
                Issue.record("a missing table was read")
            } catch let error as SQLError {
                #expect(error.code == "42P01")
            }
            #expect(runs == 1)
            // Each connection went back to the pool out of the snapshot's transaction.
            for _ in 0..<4 {
                #expect(try database.read { db in try db.fetchValue(Self.isolation) }.string == "read committed")
            }
            // Real searches, of every shape, are one statement each.
            let before = reruns()
            guard case let .postgresql(url) = catalog.application.store.location else { throw StoreError.unavailable("not on PostgreSQL") }
            try PostgresConnection(url: url, settings: "").script(
                """
                INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                SELECT gen_random_uuid()::text, 'Needle ' || g, '', 'https://example.com/' || g, g, g, 1 FROM generate_series(1, 25) g
                """)
            let items = catalog.application.store.items
            var request = ListRequest(limit: 10, order: .relevance, search: "needle")
            let first = try items.list(request, as: PlayableItem.self)
            #expect(first.items.count == 10)
            request.cursor = first.nextCursor
            #expect(try items.list(request, as: PlayableItem.self).items.count == 10)
            for order in [ListRequest.Order.field("title", descending: true), .field("createdAt", descending: false)] {
                #expect(try items.list(ListRequest(limit: 30, order: order, search: "needle"), as: PlayableItem.self).items.count == 25)
            }
            #expect(reruns() == before)
        }
    }
}
