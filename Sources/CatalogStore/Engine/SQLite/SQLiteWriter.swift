import Foundation
import GRDB

/// SQLite's one writer (the engine's part of ``GroupCommit``): transactions on the pool's
/// writer connection, the search index's queued writes at the end of each, and WAL
/// maintenance between them.
///
/// A failed statement undoes itself (triggers included) and the transaction goes on, so
/// one failing write never undoes the others; writes of several statements are submitted
/// as `atomic` and run in a savepoint of their own. (Savepoints are not the default: they
/// cost about a third of the write throughput.) Only a statement that rolls the whole
/// transaction back (a full disk, an I/O error, `OR ROLLBACK`) or a failing ``finish(_:)``
/// (the search index itself is then broken) fails the batch, and then every write in it:
/// a single writer meets no serialization failure worth running again. With
/// `synchronous=FULL` a batch's commit is one `fsync`, and each completion is called only
/// after its data is durable.
final class SQLiteWriter: CommitWriter, @unchecked Sendable {
    private let pool: DatabasePool
    /// The search index writes that creates and updates queue (``SearchIndexQueue``).
    private let searchIndex: SearchIndexQueue
    private let checkpointer: Checkpointer

    /// A writer on `pool`'s writer connection, applying `searchIndex` and restarting the
    /// WAL when `checkpointer` asks.
    init(pool: DatabasePool, searchIndex: SearchIndexQueue, checkpointer: Checkpointer) {
        self.pool = pool
        self.searchIndex = searchIndex
        self.checkpointer = checkpointer
    }

    /// Runs `body` in a transaction and commits it; rolls it back if `body` or the commit
    /// throws. `BEGIN` and `COMMIT` are statements prepared once (GRDB's `inTransaction`
    /// parsed both again each time: about 20,000 instructions of a create's 245,000). A
    /// transaction SQLite has rolled back by itself is not committed: the commit, as
    /// every statement of the batch, first checks that it is still open
    /// (``GRDB/Database/requireTransaction(_:)``), or writes that ran after the rollback
    /// would have committed alone, and the batch been reported failed.
    func transaction<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
            do {
                let result = try body(db)
                try db.requireTransaction("COMMIT")
                try db.cachedStatement(sql: "COMMIT").execute()
                return result
            } catch {
                // GRDB's rollback, which an interrupt cannot stop halfway (a transaction
                // left open is fatal to GRDB), and which does nothing when SQLite rolled back.
                try? db.rollback()
                throw error
            }
        }
    }

    func savepoint(_ db: Database) throws {
        try db.requireTransaction("SAVEPOINT job")
        try db.cachedStatement(sql: "SAVEPOINT job").execute()
    }

    func release(_ db: Database) throws { try db.cachedStatement(sql: "RELEASE job").execute() }

    func rollBack(_ db: Database) throws {
        try db.cachedStatement(sql: "ROLLBACK TO job").execute()
        try release(db)
    }

    func abortsBatch(_ error: any Error, atomic: Bool) -> Bool { false }

    func rerunsAlone(after error: any Error) -> Bool { false }

    func isRetryable(_ error: any Error) -> Bool { false }

    /// Applies the search index writes queued, once enough have.
    func finish(_ db: Database) throws -> Bool {
        try db.requireTransaction("finish")
        return try searchIndex.applyIfDue(db)
    }

    func settle() {
        try? transaction { db in try searchIndex.apply(db) }
    }

    /// Nothing: the pool is the database's, closed by it.
    func finished() {}

    /// Restarts the WAL when a checkpoint asked for it and no backup reads it.
    func didCommit() {
        guard checkpointer.backupsRunning.load(ordering: .relaxed) == 0, checkpointer.needsRestart.exchange(false, ordering: .relaxed) else { return }
        pool.writeWithoutTransaction { db in _ = try? Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(RESTART)") }
    }
}
