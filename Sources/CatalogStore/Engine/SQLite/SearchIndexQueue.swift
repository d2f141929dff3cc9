import GRDB

/// Applies the full-text index writes that triggers queue (`Migrations/0007`), one
/// statement per index for all of them. SQLite 3.40's FTS5 writes a new segment at the end
/// of every statement and savepoint that touches an index, so indexing in each write's own
/// trigger cost a segment, and its merges, per write.
///
/// The writer applies the queue at the end of a batch, inside its transaction, once it
/// holds ``due`` writes (``applyIfDue(_:)``), else when it has had no job for a moment
/// (``GroupCommit``): a segment for each batch of 16 creates made the index's writes and
/// merges about a fifth of the writer's time. Searches stay exact meanwhile: they leave
/// the queued rows out of the index's matches and test them as they read them
/// (``SQLDialect/searchShape(_:queued:)``, which reads at most the queue's first 2,048).
///
/// Used on the writer connection only, which GRDB lends to one thread at a time.
final class SearchIndexQueue {
    /// The `INSERT … SELECT` that applies one index's queued writes, by index name.
    private var statements: [String: String] = [:]
    /// Whether the queue exists yet (a database before `0007` has none).
    private var exists = false

    /// Applies and empties the queue, in the order the writes were queued.
    func apply(_ db: Database) throws {
        guard try queueExists(db) else { return }
        // Statements prepared once and kept, as for every write.
        let names = try String.fetchAll(db.cachedStatement(sql: "SELECT DISTINCT index_name FROM search_index_queue"))
        guard !names.isEmpty else { return }
        for name in names {
            try db.cachedStatement(sql: statement(db, name)).execute(arguments: [name])
        }
        try db.cachedStatement(sql: "DELETE FROM search_index_queue").execute()
    }

    /// How many queued writes a batch applies the queue at.
    static var due: Int { 256 }

    /// Applies the queue when it holds at least ``due`` writes.
    /// - Returns: whether writes still wait.
    func applyIfDue(_ db: Database) throws -> Bool {
        guard try queueExists(db) else { return false }
        // The queue's rows are numbered from 1 after each apply empties it: the last one's
        // number counts them, in one seek (`max(seq) - min(seq)` in one query read every
        // row: 78,000 instructions of a create's 314,000 in the writer).
        let queued = try Int.fetchOne(db.cachedStatement(sql: "SELECT coalesce(max(seq), 0) FROM search_index_queue")) ?? 0
        guard queued >= Self.due else { return queued > 0 }
        try apply(db)
        return false
    }

    /// Applies the queue as ``apply(_:)`` does, when the database opens.
    /// - Returns: the indexes that received a bulk load: at least ``bulk`` new rows
    ///   (queued inserts less queued deletes: another program's edit of a row queues one
    ///   of each, and does not count), to ``optimize(_:_:)``.
    func applyBulk(_ db: Database) throws -> [String] {
        guard try queueExists(db) else { return [] }
        // One streaming scan per index: a GROUP BY over the queue would sort all of it in
        // memory (60 MB for a million rows, which the server then keeps for reuse).
        let names = try String.fetchAll(db, sql: "SELECT DISTINCT index_name FROM search_index_queue")
        let loaded = try names.filter { name in
            try Int.fetchOne(
                db, sql: "SELECT sum(CASE WHEN command IS NULL THEN 1 ELSE -1 END) FROM search_index_queue WHERE index_name = ?",
                arguments: [name]) ?? 0 >= Self.bulk
        }
        try apply(db)
        return loaded.sorted()
    }

    /// Optimizes the index `name` (FTS5 `optimize`, one segment): after a bulk load, which
    /// FTS5 writes as a few large segments at its lowest level, where every later batch's
    /// small segment joins them, so merges would rewrite them again and again (on a
    /// 10,000-item load a create cost 2.4 M instructions, 1.0 M after the optimize, whose
    /// segment sits above the level new ones start at).
    static func optimize(_ db: Database, _ name: String) throws {
        let quoted = quote(name)
        try db.execute(sql: "INSERT INTO \(quoted) (\(quoted)) VALUES ('optimize')")
    }

    /// `name` as an SQL identifier, in double quotes.
    private static func quote(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// How many new rows queued for one index make a bulk load (a writer batch holds at most 512 writes).
    static var bulk: Int { 1_000 }

    private func queueExists(_ db: Database) throws -> Bool {
        if !exists {
            exists = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_index_queue')") ?? false
        }
        return exists
    }

    /// `INSERT INTO index (index, rowid, column1, column2) SELECT …`: FTS5 reads a
    /// 'delete' in the column named after the table as a command, NULL as a new row.
    private func statement(_ db: Database, _ name: String) throws -> String {
        if let statement = statements[name] { return statement }
        let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [name])
        guard columns.count == 2 else {
            throw StoreError.unavailable("The search index \(name) has \(columns.count) columns; its queue holds 2.")
        }
        let quoted = ([name] + columns).map(Self.quote)
        let statement =
            "INSERT INTO \(quoted[0]) (\(quoted[0]), rowid, \(quoted[1]), \(quoted[2]))"
            + " SELECT command, row, first, second FROM search_index_queue WHERE index_name = ? ORDER BY seq"
        statements[name] = statement
        return statement
    }
}
