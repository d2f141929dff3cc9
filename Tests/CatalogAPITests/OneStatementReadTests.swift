import Foundation
import ServiceTestSupport
import Synchronization
import Testing

@testable import CatalogStore

/// On PostgreSQL, a read that is mostly one statement (a search) runs it alone, outside a
/// transaction (no `BEGIN` and `COMMIT`, two round trips); a read that runs a second
/// statement runs again, whole, in a snapshot. Told apart by the isolation level each
/// statement runs at: `read committed` alone, `repeatable read` in the snapshot.
@Suite struct OneStatementReadTests {
    private static let isolation = "SELECT current_setting('transaction_isolation')"

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aReadOfOneStatementRunsAloneAndMoreRunAgainInASnapshot() throws {
        try TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let database = catalog.application.store.database
            let runs = Atomic<Int>(0)
            // One statement: alone, once.
            let alone = try database.snapshotOfMostlyOneStatement { db in
                runs.add(1, ordering: .relaxed)
                return try db.fetchValue(Self.isolation).string
            }
            #expect(alone == "read committed" && runs.load(ordering: .relaxed) == 1)
            // Two statements: the second is refused, and the whole read runs again in a snapshot.
            runs.store(0, ordering: .relaxed)
            let both = try database.snapshotOfMostlyOneStatement { db in
                runs.add(1, ordering: .relaxed)
                return [try db.fetchValue(Self.isolation).string, try db.fetchValue("SELECT 'second'").string]
            }
            #expect(both == ["repeatable read", "second"] && runs.load(ordering: .relaxed) == 2)
            // A read that swallows the refusal runs again all the same.
            runs.store(0, ordering: .relaxed)
            let swallowed = try database.snapshotOfMostlyOneStatement { db in
                runs.add(1, ordering: .relaxed)
                let first = try db.fetchValue(Self.isolation).string
                _ = try? db.fetchValue("SELECT 1")
                return first
            }
            #expect(swallowed == "repeatable read" && runs.load(ordering: .relaxed) == 2)
            // A failing statement fails once: not run again.
            runs.store(0, ordering: .relaxed)
            #expect(throws: (any Error).self) {
                try database.snapshotOfMostlyOneStatement { db in
                    runs.add(1, ordering: .relaxed)
                    return try db.fetchValue("SELECT * FROM no_such_table")
                }
            }
            #expect(runs.load(ordering: .relaxed) == 1)
            try catalog.stop()
        }
    }
}
