import CatalogSchema

/// SQLite's SQL (through GRDB): one server, one writer, FTS5 search with a queue of index
/// writes, an R*Tree for geography.
struct SQLiteDialect: SQLDialect {
    var readsBlock: Bool { false }
    var mayBeShared: Bool { false }
    var queuesSearchIndexWrites: Bool { true }
    var spatialIndex: SpatialIndex { .rtree }
    var keepsCrossJoinOrder: Bool { true }

    var greatest: String { "max" }
    var least: String { "min" }
    var rowRevision: String? { nil }
    var forUpdate: String { "" }
    var forDeleteSkippingLocked: String { "" }
    var forDelete: String { "" }
    var forKeyShare: String { "" }
    func caseFoldedKey(_ column: String) -> String { column }
    /// SQLite plans a statement when it is prepared, for all its arguments.
    func limited(_ select: String, order: String, atMost maxRows: Int) -> String { "\(select) \(order) LIMIT ?" }
    func unlessUnchanged(_ select: String) -> String? { nil }
    var tableExists: String { "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?" }
    func jsonElements(_ alias: String) -> String { "json_each(?) \(alias)" }
    func isAmong(_ expression: String) -> String { "\(expression) IN (SELECT value FROM json_each(?))" }
    func sequenceTop(of table: String) -> String { "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = '\(table)'), 0)" }
    func jsonElement(_ expression: String, _ index: Int) -> String { "json_extract(\(expression), '$[\(index)]')" }
    var writeVersion: String? { "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0)" }

    /// The FTS5 query for the index, and the words for `catalog_rank` and `catalog_match`.
    func searchArguments(_ words: [(word: String, prefix: Bool)]) -> SQLSearchArguments? {
        guard let query = SearchQuery.fts5(words) else { return nil }
        let terms = SearchQuery.terms(words)
        return (query, terms, terms)
    }

    /// Ranks with `catalog_rank` and tests with `catalog_match` (``CSQLite``), over the
    /// row's own text, so a rank depends on the row and the query alone, and the test
    /// matches exactly the rows the index does. Only the queue's first ``searchedQueue``
    /// writes are read, which bounds what they add to a search: rows queued past them (a
    /// bulk load by another program, until the server's next batch) are found as the
    /// index has them.
    func searchShape(_ schema: ResourceSchema, queued: Bool) -> SQLSearchShape? {
        guard let index = schema.searchTable else { return nil }
        let columns = schema.searchColumns.map { "t.\($0.column)" }.joined(separator: ", ")
        let rank = "catalog_rank(?, " + schema.searchColumns.map { "\($0.weight), t.\($0.column)" }.joined(separator: ", ") + ")"
        let match = "catalog_match(?, \(columns))"
        let from = "\(index) JOIN \(schema.table) t ON t.pk = \(index).rowid"
        guard queued else {
            return SQLSearchShape(filter: "\(index) MATCH ?", from: from, newestFirst: "\(index).rowid DESC", rank: rank, match: match, pending: nil)
        }
        // The index's name is the schema's, a constant: a literal, not a parameter.
        let rows = "(SELECT row FROM search_index_queue WHERE index_name = '\(index)' ORDER BY seq LIMIT \(Self.searchedQueue))"
        return SQLSearchShape(
            filter: "\(index) MATCH ? AND \(index).rowid NOT IN \(rows)", from: from, newestFirst: "\(index).rowid DESC", rank: rank, match: match,
            pending: "t.pk IN \(rows)")
    }

    /// How many of the search index queue's writes a search reads (``searchShape(_:queued:)``):
    /// more than the writer lets wait (``SearchIndexQueue/due`` and a batch).
    static var searchedQueue: Int { 2_048 }

    /// Counted in the full-text index, over the rowid range of the newest `sample` rows
    /// (which FTS5 seeks to in each term's postings): testing each of those rows' text
    /// with `catalog_match` cost some 7,000 instructions a row, three quarters of a
    /// selective search. Rows whose index writes still wait in the queue are not counted:
    /// the count only chooses how to search, never what a search finds.
    func searchSample(_ schema: ResourceSchema, sample: Int) -> (floor: String, count: String)? {
        guard let index = schema.searchTable else { return nil }
        return (
            "SELECT coalesce((SELECT pk FROM \(schema.table) ORDER BY pk DESC LIMIT 1 OFFSET \(sample - 1)), 0)",
            "SELECT count(*) FROM \(index) WHERE \(index) MATCH ? AND rowid >= ?"
        )
    }
}
