import CatalogSchema

/// What differs between the SQL of the engines. The store writes its statements once,
/// with `?` parameters, and asks the dialect for the few pieces that differ.
enum SQLDialect: Sendable {
    case sqlite
    case postgresql

    /// The larger of two values: SQLite's scalar `max`, PostgreSQL's `greatest`.
    var greatest: String { self == .sqlite ? "max" : "greatest" }
    /// The smaller of two values.
    var least: String { self == .sqlite ? "min" : "least" }

    /// The system column that changes with every write of a row, when the engine has one
    /// (PostgreSQL's `xmin`): part of ``RenderCache``'s key where several servers share
    /// the database. SQLite's one server invalidates its cache itself.
    var rowRevision: String? { self == .sqlite ? nil : "xmin" }

    /// Appended to the SELECT of a read-check-write: it locks the rows it reads until the
    /// transaction ends. (SQLite has one writer, which already orders every write.) `NO
    /// KEY`: it does not stop other writes from checking a foreign key to the row.
    var forUpdate: String { self == .sqlite ? "" : " FOR NO KEY UPDATE" }

    /// As ``forUpdate``, for rows the write may delete.
    var forDelete: String { self == .sqlite ? "" : " FOR UPDATE" }

    /// Appended to the SELECT of a row a write will refer to: it may not be deleted
    /// until the transaction ends (taken before any other lock of the write, in the order
    /// a deletion takes its locks).
    var forKeyShare: String { self == .sqlite ? "" : " FOR KEY SHARE" }

    /// The sort key of a text column that sorts without regard to case: the column itself
    /// in SQLite (declared `COLLATE NOCASE`), its lower case in byte order in PostgreSQL
    /// (indexed as such).
    func caseFoldedKey(_ column: String) -> String {
        self == .sqlite ? column : "lower(\(column)) COLLATE \"C\""
    }

    /// A query returning a row when the table named by its one parameter exists.
    var tableExists: String {
        switch self {
        case .sqlite: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        case .postgresql: "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
        }
    }

    /// A FROM item over a JSON array bound as one text parameter, with each element as
    /// text (`value`) and its 0-based place (`key`).
    func jsonElements(_ alias: String) -> String {
        switch self {
        case .sqlite: "json_each(?) \(alias)"
        case .postgresql:
            "(SELECT e.value, e.ordinality - 1 AS key FROM json_array_elements_text(CAST(? AS json)) WITH ORDINALITY AS e(value, ordinality)) \(alias)"
        }
    }

    /// Element `index` of the JSON array in the text `expression`, as text.
    func jsonElement(_ expression: String, _ index: Int) -> String {
        switch self {
        case .sqlite: "json_extract(\(expression), '$[\(index)]')"
        case .postgresql: "(CAST(\(expression) AS json) ->> \(index))"
        }
    }

    /// A query for a number that grows with every committed write of a resource, read in
    /// a snapshot: what that snapshot holds, unchanged while the number is (SQLite, where
    /// every resource write logs a change with a new `AUTOINCREMENT` sequence number and
    /// one writer commits them in order). `nil` where sequence numbers are not in commit
    /// order (PostgreSQL).
    var writeVersion: String? {
        self == .sqlite ? "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0)" : nil
    }

    // MARK: Search

    /// The full-text query for `text` (``SearchQuery``), or `nil` when it holds no letter or digit.
    func searchQuery(_ text: String) -> String? {
        self == .sqlite ? SearchQuery.fts5(text) : SearchQuery.tsquery(text)
    }

    /// How a list finds the rows that match a search, and ranks them (``search(_:text:queued:)``).
    typealias Search = (filter: String, filterQuery: String, from: String?, newestFirst: String, rank: String, rankQuery: String,
                        match: (expression: String, query: String)?, pending: String?)

    /// How a list of `schema` finds the rows that match a search, and ranks them.
    ///
    /// - `filter` keeps the rows of `t` (or of `from`, which replaces `schema.table t`)
    ///   that match, in the full-text index; `filterQuery` is bound to each of its `?`.
    /// - `newestFirst` orders those matches newest first, for the candidates of a ranked list.
    /// - `rank` is the relevance of a row of `t`, lower is better; `rankQuery` is bound to
    ///   each of its `?`.
    /// - `match` tests one row of `t` as it is read (SQLite): 1 when it matches.
    /// - `pending` keeps the rows of `t` whose index writes still wait in the queue
    ///   (SQLite with `queued`, ``SearchIndexQueue``), which `filter` leaves out: their
    ///   matches are those of them that `match`, so that a search finds exactly the rows
    ///   whose text matches, indexed yet or not. Only the queue's first ``searchedQueue``
    ///   writes are so read, which bounds what they add to a search: rows queued past them
    ///   (a bulk load by another program, until the server's next batch) are found as the
    ///   index has them.
    ///
    /// SQLite ranks with `catalog_rank` and tests with `catalog_match` (``CSQLite``), over
    /// the row's own text, so a rank depends on the row and the query alone, and the test
    /// matches exactly the rows the index does.
    func search(_ schema: ResourceSchema, text: String, queued: Bool) -> Search? {
        guard let index = schema.searchTable, let query = searchQuery(text) else { return nil }
        switch self {
        case .sqlite:
            let terms = SearchQuery.terms(text)
            let columns = schema.searchColumns.map { "t.\($0.column)" }.joined(separator: ", ")
            let rank = "catalog_rank(?, " + schema.searchColumns.map { "\($0.weight), t.\($0.column)" }.joined(separator: ", ") + ")"
            let match = ("catalog_match(?, \(columns))", terms)
            guard queued else {
                return ("\(index) MATCH ?", query, "\(index) JOIN \(schema.table) t ON t.pk = \(index).rowid", "\(index).rowid DESC", rank, terms, match, nil)
            }
            // The index's name is the schema's, a constant: a literal, not a parameter.
            let rows = "(SELECT row FROM search_index_queue WHERE index_name = '\(index)' ORDER BY seq LIMIT \(Self.searchedQueue))"
            return ("\(index) MATCH ? AND \(index).rowid NOT IN \(rows)", query, "\(index) JOIN \(schema.table) t ON t.pk = \(index).rowid",
                    "\(index).rowid DESC", rank, terms, match, "t.pk IN \(rows)")
        case .postgresql:
            return ("t.search_vector @@ to_tsquery('simple', ?)", query, nil, "t.pk DESC",
                    "-CAST(ts_rank(t.search_vector, to_tsquery('simple', ?)) AS float8)", query, nil, nil)
        }
    }

    /// How many of the search index queue's writes a search reads (``search(_:text:queued:)``):
    /// more than the writer lets wait (``SearchIndexQueue/due`` and a batch).
    static var searchedQueue: Int { 2_048 }

    /// A count of the matches of a search among the newest `sample` rows of `schema`
    /// (SQLite): how densely it matches, to choose between the full-text index and a walk.
    func searchSample(_ schema: ResourceSchema, sample: Int) -> String? {
        guard self == .sqlite, schema.searchTable != nil else { return nil }
        let columns = schema.searchColumns.map { "t.\($0.column)" }.joined(separator: ", ")
        return "SELECT count(*) FROM (SELECT \(columns) FROM \(schema.table) t ORDER BY t.pk DESC LIMIT \(sample)) t WHERE catalog_match(?, \(columns))"
    }
}
