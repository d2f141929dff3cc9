import Foundation
import GRDB

/// The SQLite database: WAL, `synchronous=FULL`, foreign keys, a busy timeout, one
/// group-committing writer and a pool of readers.
final class CatalogDatabase: Sendable {
    let pool: DatabasePool
    let writes: WriteQueue
    let checkpointer: Checkpointer

    init(path: String, readers: Int) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        configuration.maximumReaderCount = max(2, readers)
        configuration.persistentReadOnlyConnections = true
        configuration.label = "catalog"
        configuration.prepareDatabase { db in
            // Each connection keeps up to 16 MiB of pages in memory.
            try db.execute(sql: "PRAGMA cache_size = -16384")
            ReadBudget.install(on: db)
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        // GRDB sets NORMAL on the writer when it enables WAL; an acknowledged write must
        // survive power loss, so the one writer connection commits with FULL.
        // Checkpoints run on their own connection and thread, off the writer's path.
        let synchronous = try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 0; PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY")
            return try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
        guard synchronous == 2 else { throw StoreError.unavailable("SQLite refused synchronous=FULL.") }
        let checkpointer = try Checkpointer(path: path)
        self.checkpointer = checkpointer
        writes = WriteQueue(
            writer: pool,
            needsMaintenance: {
                checkpointer.backupsRunning.load(ordering: .relaxed) == 0 && checkpointer.needsRestart.exchange(false, ordering: .relaxed)
            },
            maintain: { db in _ = try? Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(RESTART)") })
    }

    /// Runs a read on a pooled reader connection. Single statements need no transaction.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        // The budget starts once a connection is had: waiting for one is not work.
        try pool.unsafeRead { db in try ReadBudget.run { try body(db) } }
    }

    /// Runs several reads in one read transaction, so they see one snapshot. (Its own
    /// BEGIN and COMMIT on a pooled reader: GRDB's isolated `read` costs several percent
    /// of a response on the hottest embedded reads.)
    func snapshot<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.unsafeRead { db in try ReadBudget.run {
            try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION").execute()
            do {
                let result = try body(db)
                try db.cachedStatement(sql: "COMMIT").execute()
                return result
            } catch {
                try? db.cachedStatement(sql: "ROLLBACK").execute()
                throw error
            }
        } }
    }

    /// Finishes queued writes, copies the whole WAL into the database file and truncates it.
    func close() throws {
        writes.stop()
        checkpointer.stop()
        try pool.writeWithoutTransaction { db in _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try pool.close()
    }
}
