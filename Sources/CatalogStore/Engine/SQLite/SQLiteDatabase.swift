import CLinux
import CSQLite
import Foundation
import GRDB
import GRDBSQLite

/// The embedded engine: one SQLite file in WAL mode with `synchronous=FULL`, foreign
/// keys and a busy timeout; one group-committing writer (``GroupCommit`` of a ``SQLiteWriter``), a pool of
/// readers, and a checkpointer. Holds `<file>.lock` while open.
final class SQLiteDatabase: SQLDatabase {
    let pool: DatabasePool
    let writes: GroupCommit<SQLiteWriter>
    let checkpointer: Checkpointer
    /// The connections reads run on (GRDB's own readers serve backups).
    private let readers: ConnectionPool<SQLiteReader>
    /// The database file.
    let path: String
    private let lock: DatabaseLock
    let commits = CommitSignal()
    /// Sees commits in the wal-index (``generation()``); `nil` when it cannot be mapped.
    private let commitWatch: CommitWatch?
    /// Moved on by each reader that sees a commit it had not seen, without a ``commitWatch``.
    private let generations = Generations()

    var dialect: any SQLDialect { SQLiteDialect() }

    /// SQLite's process-wide settings (``csqlite_configure()``: no memory statistics, so
    /// no global mutex around each allocation), made when the first database opens. It
    /// takes effect only if SQLite has not been used yet in this process; otherwise SQLite
    /// keeps its defaults, which are correct, only slower.
    private static let configured: Void = { _ = csqlite_configure() }()

    /// Opens (creating if needed, with its folder) the database at `path`.
    init(path: String, readers: Int) throws {
        SQLiteDatabase.configured
        try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        let lock = try DatabaseLock(databasePath: path)
        do {
            var configuration = Configuration()
            configuration.foreignKeysEnabled = true
            configuration.busyMode = .timeout(5)
            // GRDB's readers serve backups only (reads have ``SQLiteReader``s).
            configuration.maximumReaderCount = 2
            configuration.persistentReadOnlyConnections = true
            configuration.label = "catalog"
            configuration.prepareDatabase { db in
                // Each connection keeps up to 16 MiB of pages in memory.
                try db.execute(sql: "PRAGMA cache_size = -16384")
                ReadBudget.install(on: db)
                // catalog_match and catalog_rank, for searches.
                let registered = csqlite_register_search(UnsafeMutableRawPointer(db.sqliteConnection))
                guard registered == SQLITE_OK else { throw StoreError.unavailable("SQLite's search functions could not be registered (\(registered)).") }
            }
            pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB sets NORMAL on the writer when it enables WAL; an acknowledged write must
            // survive power loss, so the one writer connection commits with FULL.
            // Checkpoints run on their own connection and thread, off the writer's path.
            let synchronous = try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 0; PRAGMA cache_size = -2048; PRAGMA temp_store = MEMORY")
                // A read, so that the wal-index exists (and is initialized) for ``CommitWatch``.
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_schema")
                return try Int.fetchOne(db, sql: "PRAGMA synchronous")
            }
            guard synchronous == 2 else { throw StoreError.unavailable("SQLite refused synchronous=FULL.") }
            let commitWatch = CommitWatch(databasePath: path)
            self.commitWatch = commitWatch
            let checkpointer = try Checkpointer(path: path, commits: commitWatch)
            self.checkpointer = checkpointer
            let searchIndex = SearchIndexQueue()
            writes = GroupCommit(
                [SQLiteWriter(pool: pool, searchIndex: searchIndex, checkpointer: checkpointer)], name: "catalog-writer",
                maxBatch: 512, commits: commits)
        } catch {
            lock.release()
            throw error
        }
        let pool = ConnectionPool(size: max(2, readers), wait: .seconds(5)) { try SQLiteReader(path: path) }
        do {
            // Two readers opened now (each reads the schema), so that the first requests and
            // the first background read do not wait for that; the others when first needed.
            for _ in 0..<2 { pool.give(try SQLiteReader(path: path)) }
        } catch {
            lock.release()
            throw error
        }
        self.lock = lock
        self.path = path
        self.readers = pool
    }

    var version: String {
        "SQLite " + ((try? pool.unsafeRead { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") }) ?? "unknown")
    }

    func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        // The budget starts once a connection is had: waiting for one is not work.
        try readers.with { reader in try ReadBudget.run { try body(SQLiteReadSession(reader: reader)) } }
    }

    /// Moves the generation on once anything committed since the last call, by any
    /// connection of any process: read from the wal-index header (``CommitWatch``), with
    /// no query and no system call. Every commit is so seen by each read that begins
    /// after it, before it answers from a cache: an answer kept for an earlier number is
    /// never served after a commit it does not show.
    ///
    /// Without the mapping, a reader asks SQLite (`PRAGMA data_version`, which counts
    /// every other connection's commits, other processes' too); then `nil` when no reader
    /// is free at once: a read that would wait is not doubled for a cache.
    var credentials: CredentialWatch? { nil }

    func generation() throws -> UInt64? {
        if let commitWatch { return commitWatch.generation() }
        return try readers.withFree { reader in try reader.observeCommits(generations) }
    }

    func snapshot<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try readers.with { reader in
            try ReadBudget.run {
                try reader.execute("BEGIN DEFERRED TRANSACTION")
                do {
                    let result = try body(SQLiteReadSession(reader: reader))
                    try reader.execute("COMMIT")
                    return result
                } catch {
                    try? reader.execute("ROLLBACK")
                    throw error
                }
            }
        }
    }

    func submit<T: Sendable>(
        _ options: WriteOptions, atomic: Bool, heavy: Bool, _ work: @escaping (any SQLConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        // A write that keeps its answer too is two statements at least: all or nothing.
        let atomic = atomic || options.inTransaction != nil, work = options.wrapping(work, completion: completion)
        writes.submit(options, atomic: atomic, heavy: heavy, { db in try work(SQLiteSession(db: db, direct: true)) }, completion: completion)
    }

    func migrate(_ migrations: [Migration]) throws -> [String] {
        try pool.writeWithoutTransaction { db in
            // Index what other programs wrote (``SearchIndexQueue``) while the indexes are
            // still those the queued rows were written for, and again after the migrations.
            var loaded = try applySearchIndexQueue(db)
            let applied = try MigrationRunner.migrate(SQLiteSession(db: db, direct: false), migrations: migrations) { body in
                try db.inTransaction(.immediate) {
                    try body()
                    return .commit
                }
            } script: { sql in
                try db.execute(sql: sql)
            }
            loaded += try applySearchIndexQueue(db)
            // An index that received a bulk load is optimized, each in a transaction of its
            // own after the rows are indexed: only an optimization, so a failure (a full
            // disk while it rewrites the index) leaves the index as it was and the start goes on.
            for name in Set(loaded).sorted() {
                try? db.inTransaction(.immediate) {
                    try SearchIndexQueue.optimize(db, name)
                    return .commit
                }
            }
            return applied
        }
    }

    /// Applies the queue; returns the indexes that received a bulk load.
    private func applySearchIndexQueue(_ db: Database) throws -> [String] {
        var loaded: [String] = []
        try db.inTransaction(.immediate) {
            loaded = try SearchIndexQueue().applyBulk(db)
            return .commit
        }
        return loaded
    }

    /// Finishes queued writes, copies the whole WAL into the database file, truncates it
    /// and releases the file.
    func close() throws {
        defer { lock.release() }
        writes.stop()
        checkpointer.stop()
        commitWatch?.stop()
        readers.close()
        try pool.writeWithoutTransaction { db in _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try pool.close()
    }
}

extension ReadBudget {
    /// Installs the budget's check on `db`'s connection.
    static func install(on db: Database) {
        sqlite3_progress_handler(db.sqliteConnection, 1000, clinux_budget_exceeded, nil)
    }
}
