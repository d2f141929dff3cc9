import CatalogSchema

/// What differs between the SQL of the engines, and what each engine can do. The store
/// writes its statements once, with `?` parameters, asks the dialect for the few pieces
/// that differ, and decides by its declared capabilities, never by which engine it is.
/// The engines' own: ``SQLiteDialect`` and ``PostgreSQLDialect``.
protocol SQLDialect: Sendable {
    // MARK: Capabilities

    /// Whether a read waits on a network (PostgreSQL): reads then run off the event loops.
    var readsBlock: Bool { get }
    /// Whether several servers may share the database (PostgreSQL): what one server
    /// remembers of it may be changed by another.
    var mayBeShared: Bool { get }
    /// Whether full-text index writes wait in `search_index_queue` for the writer to apply
    /// them in batches (SQLite), which searches must then read too.
    var queuesSearchIndexWrites: Bool { get }
    /// The spatial index geographic lists filter with.
    var spatialIndex: SpatialIndex { get }
    /// Whether a `CROSS JOIN` whose left side is a subquery with `ORDER BY … LIMIT` yields
    /// its rows in that side's order (SQLite: the left side of a `CROSS JOIN` stays the
    /// outer loop, and a sorted, limited subquery is read in its order), so that a search's
    /// page, read whole by joining its sorted keys to the table, needs no second sort.
    /// (SQLite sorts again into a temporary b-tree, about 13,000 instructions a search; a
    /// result's order without `ORDER BY` is SQLite's behaviour, not SQL's, which
    /// `SearchTests` checks against an independent sort.) PostgreSQL is given the
    /// `ORDER BY`: its planner sees the order it already has and does not sort again.
    var keepsCrossJoinOrder: Bool { get }

    // MARK: Pieces of statements

    /// The larger of two values: SQLite's scalar `max`, PostgreSQL's `greatest`.
    var greatest: String { get }
    /// The smaller of two values.
    var least: String { get }
    /// The system column that changes with every write of a row, when the engine has one
    /// (PostgreSQL's `xmin`): part of ``RenderCache``'s key where several servers share
    /// the database. SQLite's one server invalidates its cache itself.
    var rowRevision: String? { get }
    /// Appended to the SELECT of a read-check-write: it locks the rows it reads until the
    /// transaction ends. (SQLite has one writer, which already orders every write.) `NO
    /// KEY`: it does not stop other writes from checking a foreign key to the row.
    var forUpdate: String { get }
    /// As ``forUpdate``, for rows the write may delete.
    var forDelete: String { get }
    /// As ``forDelete``, passing over rows another writer holds (work that several servers
    /// share: each takes its own rows, none waits).
    var forDeleteSkippingLocked: String { get }
    /// Appended to the SELECT of a row a write will refer to: it may not be deleted
    /// until the transaction ends (taken before any other lock of the write, in the order
    /// a deletion takes its locks).
    var forKeyShare: String { get }
    /// The sort key of a text column that sorts without regard to case: the column itself
    /// in SQLite (declared `COLLATE NOCASE`), its lower case in byte order in PostgreSQL
    /// (indexed as such).
    func caseFoldedKey(_ column: String) -> String
    /// `select` sorted by `order` (an `ORDER BY` of its output columns) with a bound
    /// `LIMIT ?`, never more than `maxRows` rows. PostgreSQL (`plan_cache_mode = auto`)
    /// plans a prepared statement again at every execution unless its one plan for all
    /// arguments is estimated cheaper than the plans made for each (planning included),
    /// and it estimates a bound limit as a tenth of the rows below it: over a whole table,
    /// a page of 21 was planned anew each time (0.1 ms, most of its time for a list page).
    /// There the rows below the bound limit are a query limited to the constant `maxRows`,
    /// which its plan is chosen for (an index in the page's order, as for one page); the
    /// bound limit stops that query once the page is read. Only for statements whose best
    /// plan does not depend on their arguments' values (not a filter on a rare value).
    func limited(_ select: String, order: String, atMost maxRows: Int) -> String
    /// `select`'s rows, each with the statement's snapshot of the database as a last
    /// column, unless that snapshot is the one bound to a last parameter: then one row of
    /// nulls and the snapshot, `select` not run (so too when `select` has no rows). Two
    /// statements with the same snapshot see the same database, whoever writes to it: a
    /// page read in one is still exact in the other. `nil` where the engine knows each
    /// commit itself (SQLite: ``SQLDatabase/generation()``).
    ///
    /// PostgreSQL's snapshot as text (`xmin:xmax:xip,…`, `pg_current_snapshot()`) names
    /// which transactions it sees as committed: the running ones, and every one from
    /// `xmax` on. A transaction that writes has an id; once it ends, `xmax` is past it and
    /// it runs no more, so every later snapshot differs. It holds for the statements of
    /// one server run that lost no commit it had shown: with it goes when the server
    /// started (a standby that took over starts its own), and where commits are shown
    /// only once on disk (`synchronous_commit` other than `off`: the default; with `off`, a
    /// crash may lose a commit a kept page shows, until the next write). The reading
    /// sessions have no transaction id (a session's own is left out of its snapshot): they
    /// are read-only. A server in recovery names no snapshot (NULL): nothing is kept. The
    /// one-time filter keeps PostgreSQL from reading any row when it matches; the rows
    /// come in `select`'s order (a nested loop over one outer row, there being no join
    /// condition).
    func unlessUnchanged(_ select: String) -> String?
    /// A query returning a row when the table named by its one parameter exists.
    var tableExists: String { get }
    /// A FROM item over a JSON array bound as one text parameter, with each element as
    /// text (`value`) and its 0-based place (`key`).
    func jsonElements(_ alias: String) -> String
    /// A condition: `expression` is one of the elements of a JSON array of text bound as
    /// one parameter, written so that an index on `expression` serves it (on PostgreSQL,
    /// `= ANY` of an array, which the planner reads as a few index probes, where `IN` over
    /// the array's elements estimates a hundred rows and may scan the whole table).
    func isAmong(_ expression: String) -> String
    /// A query of the highest `seq` a change log `table` has ever handed out (which no
    /// deletion of its rows lowers): SQLite's `AUTOINCREMENT` record of it, PostgreSQL's
    /// sequence (which every change log shares).
    func sequenceTop(of table: String) -> String
    /// Element `index` of the JSON array in the text `expression`, as text.
    func jsonElement(_ expression: String, _ index: Int) -> String
    /// A query for a number that grows with every committed write of a resource, read in
    /// a snapshot: what that snapshot holds, unchanged while the number is (SQLite, where
    /// every resource write logs a change with a new `AUTOINCREMENT` sequence number and
    /// one writer commits them in order). `nil` where sequence numbers are not in commit
    /// order (PostgreSQL).
    var writeVersion: String? { get }

    // MARK: Search

    /// How a list of `schema` finds the rows that match a search, and ranks them
    /// (``SQLSearchShape``): the same SQL for every search, made once a store.
    func searchShape(_ schema: ResourceSchema, queued: Bool) -> SQLSearchShape?
    /// What a search for `words` (``SearchQuery/searched(_:)``) binds to its shape's
    /// parameters, or `nil` when there are none (the text held no letter or digit).
    func searchArguments(_ words: [(word: String, prefix: Bool)]) -> SQLSearchArguments?
    /// A count of the matches of a search among the newest `sample` rows of `schema`, when
    /// the engine can test a row as it reads it (SQLite): how densely it matches, to choose
    /// between the full-text index and a walk. `floor` reads the key of the oldest of
    /// those rows (no parameter); `count`'s parameters are the search's ``SQLSearchArguments`` `filter`
    /// and that key.
    func searchSample(_ schema: ResourceSchema, sample: Int) -> (floor: String, count: String)?
}

/// The spatial index of geographic lists.
enum SpatialIndex: Sendable {
    /// An R*Tree table, `locations_rtree` (SQLite).
    case rtree
    /// A GiST index on `point(longitude, latitude)` (PostgreSQL).
    case pointGiST
}

/// How a list finds the rows that match a search, and ranks them: the SQL, which every
/// search of a resource shares.
///
/// - `filter` keeps the rows of `t` (or of `from`, which replaces `schema.table t`)
///   that match, in the full-text index; the search's `filter` argument is bound to each of its `?`.
/// - `newestFirst` orders those matches newest first, for the candidates of a ranked list.
/// - `rank` is the relevance of a row of `t`, lower is better; the `rank` argument is
///   bound to each of its `?`.
/// - `match` tests one row of `t` as it is read (SQLite): 1 when it matches; the `match`
///   argument is bound to each of its `?`.
/// - `pending` keeps the rows of `t` whose index writes still wait in the queue
///   (SQLite with `queued`, ``SearchIndexQueue``), which `filter` leaves out: their
///   matches are those of them that `match`, so that a search finds exactly the rows
///   whose text matches, indexed yet or not.
///
/// A class, made once a store: a search passes it on by reference (as a tuple of six
/// strings it was copied field by field through the runtime's generic tuple witnesses,
/// some 5,000 instructions a search).
final class SQLSearchShape: Sendable {
    let filter: String
    let from: String?
    let newestFirst: String
    let rank: String
    let match: String?
    let pending: String?
    /// How many `?` `filter`, `rank` and `match` hold, counted once.
    let parameters: (filter: Int, rank: Int, match: Int)

    init(filter: String, from: String?, newestFirst: String, rank: String, match: String?, pending: String?) {
        self.filter = filter
        self.from = from
        self.newestFirst = newestFirst
        self.rank = rank
        self.match = match
        self.pending = pending
        func parameters(_ sql: String?) -> Int { sql?.utf8.count(where: { $0 == UInt8(ascii: "?") }) ?? 0 }
        self.parameters = (parameters(filter), parameters(rank), parameters(match))
    }
}

/// What one search binds to the `?` of its ``SQLSearchShape``'s `filter`, `rank` and `match`.
typealias SQLSearchArguments = (filter: String, rank: String, match: String)

/// One search: its resource's shape, its words and what they bind to it.
struct SQLSearch {
    let shape: SQLSearchShape
    /// The words it looks for (``SearchQuery/searched(_:)``), split once a search.
    let words: [(word: String, prefix: Bool)]
    let arguments: SQLSearchArguments

    /// What the search binds to its shape's `filter`: its argument for each `?`.
    var filterArguments: SQLArguments { Array(repeating: arguments.filter, count: shape.parameters.filter) }
    /// What the search binds to its shape's `rank`.
    var rankArguments: SQLArguments { Array(repeating: arguments.rank, count: shape.parameters.rank) }
    /// What the search binds to its shape's `match`.
    var matchArguments: SQLArguments { Array(repeating: arguments.match, count: shape.parameters.match) }
}
