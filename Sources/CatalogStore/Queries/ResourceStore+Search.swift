import CatalogModels
import CatalogSchema
import Foundation

/// How a list finds its search's matches: the planner that chooses between the full-text
/// index, a walk along the list's order and a kept list of matches, and their queries.
extension ResourceStore {
    /// How many of the newest matches of a search a list by relevance ranks.
    static var rankedCandidates: Int { 500 }

    /// How many of the newest rows a search tests to see how densely it matches.
    static var searchSample: Int { 256 }

    /// The most rows a search's walk reads (``walkedQuery(_:_:after:search:)``).
    static var walkLimit: Int { 4_000 }

    /// Whether the search of `request` (not by distance) first walks the list's order, testing rows as it
    /// reads them (SQLite, ``SQLSearchShape``'s `match`), rather than looking
    /// its matches up in the full-text index, which hands over every match to be sorted
    /// (and, for a prefix of a common word, merges their postings first): when at least
    /// a quarter of the newest rows match, for relevance (whose 500 candidates a walk of
    /// the newest rows then finds in some thousand rows); when at least one in 64 does,
    /// for a sorted list (whose page a walk along the sort's index then fills). A
    /// search's count is kept for a while, so the next pages of a search (and a popular
    /// one) skip the sample. Sampled in `db`, the snapshot the search reads, whose
    /// ``SQLDialect/writeVersion`` is `version`: the oldest sampled row is found once a version
    /// (stepping back 256 rows cost 40,000 instructions a search). The count comes from
    /// the sampled rows' words (``SampleWords``) where they give one, else from the index.
    /// `search` is the request's (``sqlSearch(_:queued:)``); a search without one never walks.
    func walksSearch(_ db: any SQLConnection, _ request: ListRequest, _ search: SQLSearch?, version: Int64?) throws -> Bool {
        guard let search, request.search != nil, let sample = sampling else { return false }
        let matches = try searchDensities.matches(search.arguments.filter) {
            if let version, let words = try sample.words.words(db, version: version), let count = words.matches(search.words) {
                return count
            }
            let floor = try searchDensities.floor(version: version) { try db.fetchValue(sample.sql.floor).int64 ?? 0 }
            return try db.fetchValue(sample.sql.count, [search.arguments.filter, floor]).int ?? 0
        }
        return matches >= (request.order == .relevance ? Self.searchSample / 4 : Self.searchSample / 64)
    }

    /// The page of a search (not by distance), as `db` sees it: from its kept matches
    /// when this version of the database has them (``keptPage(_:_:_:after:search:)``),
    /// otherwise by a walk or from the index. A later page of a search whose matches
    /// are not kept for this version reads them all first, in order, and keeps them
    /// (``keepsMatches(_:walks:)``): the pages after it then cost what a page of a plain
    /// list does, until the next write. A first page is never kept: it is answered as
    /// cheaply as a search that is never paged, and the page cache keeps it whole.
    func searchQuery(_ db: any SQLConnection, _ request: ListRequest, after cursor: ListCursor?) throws -> (String, SQLArguments) {
        let (queueWaits, version) = try searchState(db)
        let search = request.search.flatMap { sqlSearch($0, queued: queueWaits) }
        // Who lists matters only where some rows are hidden from some viewers.
        let key = visibleFilter == nil ? request.fingerprint : "\(request.viewer)|\(request.fingerprint)"
        let kept = version.flatMap { searchLists.matches(key, version: $0) }
        if let kept, let page = try keptPage(db, request, kept, after: cursor, search: search) { return page }
        let walks = try walksSearch(db, request, search, version: version)
        // Read and kept once a version: a list kept already that cannot serve this page (its
        // cursor's row moved, or the page lies past it) would be read the same again.
        if kept == nil, let version, let cursor, keepsMatches(request, walks: walks) {
            var pks: [Int64] = []
            if walks, let candidates = try walkedCandidates(db, request, search: search) {
                pks = candidates.map(\.pk)
            } else {
                let ordered = try listQuery(request, after: nil, way: .ordered, search: search)
                let rows = try db.query(ordered.0, ordered.1)
                while try rows.step() { pks.append(rows.integer(0)) }
            }
            let matches = searchLists.keep(key, version: version, pks: pks)
            if let page = try keptPage(db, request, matches, after: cursor, search: search) { return page }
        }
        return try walks ? walkedQuery(db, request, after: cursor, search: search) : listQuery(request, after: cursor, way: .index, search: search)
    }

    /// The search for `text`: the resource's search SQL (``searchShapes``), with what
    /// `text` binds to it; `nil` when the resource has no search, or the text no letter or digit.
    /// `queued`: whether the search reads the index's queue too.
    func sqlSearch(_ text: String, queued: Bool) -> SQLSearch? {
        let words = SearchQuery.searched(text)
        guard let shape = queued ? searchShapes.queued : searchShapes.unqueued, let arguments = database.dialect.searchArguments(words) else {
            return nil
        }
        return SQLSearch(shape: shape, words: words, arguments: arguments)
    }

    /// What a search reads of `db`'s snapshot before it chooses how to run: whether the
    /// search index's queue holds writes (SQLite: only then must a search read it,
    /// ``SQLDialect/searchShape(_:queued:)``; the writer applies the queue within a
    /// second, so it is mostly empty, and a search then spares the temporary tables its
    /// reads of the queue build, 128,000 instructions of a selective search; one look at
    /// the queue's first row, of any index), and the database's ``SQLDialect/writeVersion``
    /// (`nil` where the engine has none). One statement where there are both (``searchStateSQL``).
    func searchState(_ db: any SQLConnection) throws -> (queueWaits: Bool, version: Int64?) {
        if let searchStateSQL {
            let rows = try db.query(searchStateSQL, [])
            guard try rows.step() else { return (true, nil) }
            return (rows.integer(1) != 0, rows.integer(0))
        }
        let queueWaits = try searchesQueue && db.exists("SELECT 1 FROM search_index_queue LIMIT 1")
        return (queueWaits, try db.dialect.writeVersion.flatMap { try db.fetchValue($0).int64 })
    }

    /// The page of a search that walks: the walk reads at most ``walkLimit`` rows in the
    /// list's order (newest first for relevance) and stops once it holds the page (the
    /// candidates, for relevance, which it ranks as it reads them). If it found them, or
    /// reached the end, the page is made from exactly those rows; if they lie further
    /// than the walk goes (matches that cluster elsewhere in the order), the search looks
    /// them up in the index after all. Either way it finds what the index would: a walk
    /// only bounds the work.
    /// `search`: the request's search, reading the index's queue if it holds writes (``searchState(_:)``).
    func walkedQuery(_ db: any SQLConnection, _ request: ListRequest, after cursor: ListCursor?, search: SQLSearch?) throws -> (String, SQLArguments) {
        if request.order == .relevance {
            guard var candidates = try walkedCandidates(db, request, search: search) else { return try listQuery(request, after: cursor, way: .index, search: search) }
            // The page: the best-ranked candidates after the cursor.
            if let cursor, case let .real(rank) = cursor.key {
                let after = (rank: rank, id: Array(cursor.id.utf8))
                candidates.removeAll { !Self.precedes(after, ($0.rank, $0.id)) }
            }
            return try listQuery(request, after: cursor, way: .rows(candidates.prefix(request.limit + 1).map(\.pk)), search: search)
        }
        let walk = try listQuery(request, after: cursor, way: .walk, search: search)
        let rows = try db.query(walk.0, walk.1)
        var read = 0
        var found: [Int64] = []
        while found.count <= request.limit, try rows.step() {
            read += 1
            if rows.integer(1) != 0 { found.append(rows.integer(0)) }
        }
        if found.count <= request.limit, read == Self.walkLimit { return try listQuery(request, after: cursor, way: .index, search: search) }
        return try listQuery(request, after: cursor, way: .rows(found), search: search)
    }

    /// Whether the matches of a search are kept in their list's order (``searchQuery(_:_:after:)``):
    /// where the engine can tell, within a snapshot, that nothing has changed since they
    /// were read (SQLite), for searches not within a parent; sorted searches only when
    /// they do not walk (a walk finds a page, not every match, and is cheap).
    func keepsMatches(_ request: ListRequest, walks: Bool) -> Bool {
        guard request.search != nil, request.scope == nil, database.dialect.writeVersion != nil else { return false }
        return switch request.order {
        case .relevance: true
        case .field: !walks
        case .distance: false
        }
    }

    /// The page of a search from its matches in order, as read once for this version of
    /// the database (at most ``SearchLists/listLimit`` of them; for relevance, its ranked
    /// candidates): a search whose matches cluster in the order (`q=77&sort=title` at a
    /// million items: eleven thousand titles side by side, which no walk reaches) reads
    /// and sorts them all once, and every page after that costs what a page of a plain
    /// list does, until the next write. The page after a cursor starts after the
    /// cursor's row, found in the list with the key it still has. `nil` for a cursor whose
    /// row has moved, or a page past what the list holds: the search then runs unkept.
    func keptPage(
        _ db: any SQLConnection, _ request: ListRequest, _ matches: SearchLists.Matches, after cursor: ListCursor?, search: SQLSearch?
    ) throws -> (String, SQLArguments)? {
        var start = 0
        if let cursor {
            // The cursor's row, if its sort key is still the cursor's (equal as the order compares).
            let key = try sortKey(request, search: search)
            guard
                let pk = try db.fetchValue(
                    "SELECT t.pk FROM \(schema.table) t WHERE \(key.expression) = ? AND t.id = ?",
                    key.arguments + [cursor.key.sqlValue, cursor.id]
                ).int64,
                let index = matches.pks.firstIndex(of: pk)
            else { return nil }
            start = index + 1
        }
        let end = start + request.limit + 1
        guard end <= matches.pks.count || matches.complete else { return nil }
        return try listQuery(request, after: cursor, way: .rows(Array(matches.pks[start..<min(end, matches.pks.count)])), search: search)
    }

    /// The candidates of a search by relevance, found by a walk of the newest rows that
    /// ranks them as it reads them, best first (ties by id); `nil` when the walk read
    /// ``walkLimit`` rows without finding them all.
    func walkedCandidates(_ db: any SQLConnection, _ request: ListRequest, search: SQLSearch?) throws -> [(rank: Double, id: [UInt8], pk: Int64)]? {
        let walk = try listQuery(request, after: nil, way: .walk, search: search)
        let rows = try db.query(walk.0, walk.1)
        var read = 0
        var candidates: [(rank: Double, id: [UInt8], pk: Int64)] = []
        while candidates.count < Self.rankedCandidates, try rows.step() {
            read += 1
            if !rows.isNull(2) { candidates.append((rows.real(2), Array(rows.text(1)), rows.integer(0))) }
        }
        if candidates.count < Self.rankedCandidates, read == Self.walkLimit { return nil }
        candidates.sort { Self.precedes(($0.rank, $0.id), ($1.rank, $1.id)) }
        return candidates
    }

    /// Whether `a` comes before `b` in a list by relevance: better rank, then id (ids are ASCII).
    static func precedes(_ a: (rank: Double, id: [UInt8]), _ b: (rank: Double, id: [UInt8])) -> Bool {
        a.rank != b.rank ? a.rank < b.rank : a.id.lexicographicallyPrecedes(b.id)
    }

    /// How a list finds the matches of its search.
    enum SearchWay {
        /// In the full-text index.
        case index
        /// Testing each row read along the list's order: the walk of ``walkedQuery(_:_:after:search:)``,
        /// which answers `(pk, matches)` rows, or `(pk, id, rank or NULL)` for relevance.
        case walk
        /// Exactly these rows (by `pk`), which a walk or a kept list found: the page's
        /// rows (at most its limit and one), after its cursor, in the list's order.
        case rows([Int64])
        /// The `pk` of every match (at most ``SearchLists/listLimit``), in the list's
        /// order, from the index: what ``searchQuery(_:_:after:)`` keeps.
        case ordered
    }
}
