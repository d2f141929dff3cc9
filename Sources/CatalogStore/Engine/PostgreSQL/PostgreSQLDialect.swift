import CatalogSchema

/// PostgreSQL's SQL (through libpq): several servers on one database, row locks for
/// read-check-writes, `tsvector` search, a GiST index for geography.
struct PostgreSQLDialect: SQLDialect {
    var readsBlock: Bool { true }
    var mayBeShared: Bool { true }
    var queuesSearchIndexWrites: Bool { false }
    var spatialIndex: SpatialIndex { .pointGiST }
    var keepsCrossJoinOrder: Bool { false }

    var greatest: String { "greatest" }
    var least: String { "least" }
    var rowRevision: String? { "xmin" }
    var forUpdate: String { " FOR NO KEY UPDATE" }
    var forDeleteSkippingLocked: String { " FOR UPDATE SKIP LOCKED" }
    var forDelete: String { " FOR UPDATE" }
    var forKeyShare: String { " FOR KEY SHARE" }
    func caseFoldedKey(_ column: String) -> String { "lower(\(column)) COLLATE \"C\"" }
    /// The rows come in the inner query's order (no second sort: `PlanCacheTests`).
    func limited(_ select: String, order: String, atMost maxRows: Int) -> String {
        "SELECT * FROM (\(select) \(order) LIMIT \(maxRows)) limited \(order) LIMIT ?"
    }
    func unlessUnchanged(_ select: String) -> String? {
        "SELECT page.*, taken.snapshot FROM (SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE \(Self.snapshot) END AS snapshot) taken"
            + " LEFT JOIN LATERAL (SELECT * FROM (\(select)) page WHERE \(Self.snapshot) IS DISTINCT FROM ?) page ON TRUE"
    }
    /// The statement's snapshot and when the server started (a snapshot's numbers start
    /// again on a server that took over, or restarted). Stable functions only: the
    /// condition on it is then planned as a one-time filter, run before any row is read
    /// (`pg_is_in_recovery()`, volatile, only blanks the column: a server in recovery,
    /// whose snapshots do not name the transactions they see as running, keeps no page).
    private static let snapshot = "CAST(pg_current_snapshot() AS text) || ' ' || CAST(extract(epoch FROM pg_postmaster_start_time()) AS text)"
    var tableExists: String { "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?" }
    func jsonElements(_ alias: String) -> String {
        "(SELECT e.value, e.ordinality - 1 AS key FROM json_array_elements_text(CAST(? AS json)) WITH ORDINALITY AS e(value, ordinality)) \(alias)"
    }
    func isAmong(_ expression: String) -> String { "\(expression) = ANY (ARRAY(SELECT json_array_elements_text(CAST(? AS json))))" }
    func sequenceTop(of table: String) -> String { "SELECT last_value FROM changes_seq" }
    func jsonElement(_ expression: String, _ index: Int) -> String { "(CAST(\(expression) AS json) ->> \(index))" }
    var writeVersion: String? { nil }

    func searchArguments(_ words: [(word: String, prefix: Bool)]) -> SQLSearchArguments? {
        SearchQuery.tsquery(words).map { ($0, $0, $0) }
    }

    func searchShape(_ schema: ResourceSchema, queued: Bool) -> SQLSearchShape? {
        guard schema.searchTable != nil else { return nil }
        return SQLSearchShape(
            filter: "t.search_vector @@ to_tsquery('simple', ?)", from: nil, newestFirst: "t.pk DESC",
            rank: "-CAST(ts_rank(t.search_vector, to_tsquery('simple', ?)) AS float8)", match: nil, pending: nil)
    }

    func searchSample(_ schema: ResourceSchema, sample: Int) -> (floor: String, count: String)? { nil }
}
