import CatalogModels
import CatalogSchema
import Foundation

/// Lists: pages in a sort order, filtered, searched or by distance, keyset cursors, and
/// the pages kept until the next commit (``PageCache``).
extension ResourceStore {
    /// One page of the list described by `request`, as `Model`s (the resource's wire type).
    public func list<Model: Codable & Sendable & Hashable>(_ request: ListRequest, as type: Model.Type) throws(StoreError) -> ListPage<Model> {
        let page = try renderedList(request)
        do {
            let decoded = try CatalogJSON.makeDecoder().decode(Page<Model>.self, from: Data(page.json))
            return ListPage(items: decoded.items, nextCursor: decoded.nextCursor)
        } catch {
            throw .unavailable("The database holds a \(schema.noun) its model cannot read.")
        }
    }

    /// One page as the JSON document of a `Page` (`{"items":[…],"nextCursor":"…"}`),
    /// rendered straight from the statement: the fast path for list endpoints.
    ///
    /// A list by distance looks in growing rings first (10 km, then eight times wider,
    /// up to its radius): a ring that fills the page holds exactly the nearest results,
    /// so a `near` without a radius costs what the locations around the point cost, not
    /// a distance to every location.
    ///
    /// A page of all fields of a resource that caches renderings is kept (``PageCache``)
    /// until the next commit, and the same request is answered again from the render
    /// cache without a query (it checks first that nothing has committed since).
    /// The page's digest (``Digest``) comes with it when the page is kept: a page served
    /// again is not hashed again.
    public func renderedList(_ request: ListRequest) throws(StoreError) -> (json: [UInt8], nextCursor: String?, digest: UInt64?) {
        var keeping: (pages: PageCache, key: PageCache.Key, generation: UInt64)?
        // The cache is skipped when the generation cannot be had at once (the read reports any error).
        if let pages, request.fields == .all, let generation = try? database.generation() {
            let key = PageCache.Key(request, viewer: visibleFilter != nil)
            if let page = pages.page(key, generation: generation), let json = page.json ?? rendering.write(page) {
                return (json, page.nextCursor, page.digest)
            }
            keeping = (pages, key, generation)
        }
        let cursor = try decodeCursor(request)
        var kept = keeping.map { _ in PageCache.Page() }
        // One budget for all the rings: interrupted once their reads together take too long.
        let page = try guarded { try ReadBudget.run { try renderedList(request, after: cursor, kept: &kept) } }
        guard let keeping, let kept, kept.isComplete else { return (page.json, page.nextCursor, nil) }
        let digest = keeping.pages.keep(keeping.key, kept, json: page.json, nextCursor: page.nextCursor, generation: keeping.generation)
        return (page.json, page.nextCursor, digest)
    }

    /// ``renderedList(_:)`` of a list read in one statement (no parent or distance; a
    /// search where the engine reads nothing first to choose how it runs: PostgreSQL),
    /// read from `reactor`'s event loop without blocking it where reads wait on a network
    /// (PostgreSQL): `completion` runs on the loop with the page, or with
    /// ``LoopReadOutcome/elsewhere`` when the read must run on a thread that may wait.
    /// False, having started nothing, when it cannot be read so: call ``renderedList(_:)``
    /// then. Throws what a bad cursor or filter is. A search or a geographic list is sent as
    /// a heavy read of `caller`'s (who asks, as its budgets name it: made only for such a read), apart from the quick
    /// ones (``SQLDatabase/readOnLoop(_:_:_:sharing:heavyCaller:isAbandoned:_:completion:)``).
    ///
    /// A page of all fields of a plain list is kept (``loopPages``) with the database
    /// snapshot it was read in, and the same request sends that snapshot along: when the
    /// database is still there, PostgreSQL reads no row and the page is answered as kept
    /// (``SQLDialect/unlessUnchanged(_:)``). Any write, through any server, moves the
    /// snapshot on.
    public func renderedListOnLoop(
        _ request: ListRequest, caller: @autoclosure () -> String, reactor: any ReadReactor, isAbandoned: @escaping () -> Bool,
        completion: @escaping (LoopReadOutcome<(json: [UInt8], nextCursor: String?, digest: UInt64?)>) -> Void
    ) throws(StoreError) -> Bool {
        guard request.scope?.parent == nil, request.order != .distance, request.near == nil else { return false }
        let heavy = request.search != nil || !request.areas.isEmpty
        let cursor = try decodeCursor(request)
        let epoch = RenderCache.currentEpoch
        // The page written from `rows`; `kept` (when given) receives what makes it.
        let write = { [self] (rows: any SQLRows, kept: inout PageCache.Page?) throws -> (json: [UInt8], nextCursor: String?) in
            var writer = JSONWriter(capacity: 256 + request.limit * 512)
            let next = try rendering.page(
                rows, request, fingerprint: { fingerprint(request) }, epoch: epoch, maxBytes: ListRequest.maxPageBytes, into: &writer, kept: &kept)
            return (writer.bytes, next)
        }
        let done = { (outcome: Result<(json: [UInt8], nextCursor: String?, digest: UInt64?), any Error>?) in
            guard let outcome else { return completion(.elsewhere) }
            completion(.done(outcome.mapError { StoreError.from($0) }))
        }
        guard !heavy, let pages = request.fields == .all ? loopPages : nil else {
            let sql: String, arguments: SQLArguments
            if request.search != nil {
                // The statement the pool's read would run, when it would run it first and alone.
                do {
                    (sql, arguments) = try searchQuery(NoStatements(dialect: database.dialect), request, after: cursor)
                } catch is NoStatements.Refused {
                    return false
                } catch {
                    throw StoreError.from(error)
                }
            } else {
                (sql, arguments) = try listQuery(request, after: cursor)
            }
            return database.readOnLoop(
                reactor, sql, arguments, sharing: .identical, heavyCaller: heavy ? caller() : nil, isAbandoned: isAbandoned,
                { rows in
                    var kept: PageCache.Page?
                    let page = try write(rows, &kept)
                    return (page.json, page.nextCursor, nil)
                }, completion: done)
        }
        let key = PageCache.Key(request, viewer: visibleFilter != nil)
        // The page kept in the newest snapshot, written out now, to answer with if the
        // database is still there.
        var known: (snapshot: String, json: [UInt8], nextCursor: String?, digest: UInt64)?
        if let newest = pages.newestSnapshot, let page = pages.page(key, generation: newest.generation), let json = page.json ?? rendering.write(page) {
            known = (newest.text, json, page.nextCursor, page.digest)
        }
        let (sql, arguments) = try listQuery(request, after: cursor, way: .index, search: nil, unlessUnchanged: true)
        return database.readOnLoop(
            reactor, sql, arguments + [known?.snapshot ?? ""], sharing: .identical, isAbandoned: isAbandoned,
            { [self] rows in
                // One row at least: the page's first, or nulls (the page kept is current, or
                // there are no rows), each with the statement's snapshot last.
                guard try rows.step() else { throw StoreError.unavailable("The database answered a list without its snapshot.") }
                let snapshot = rows.text(rows.columnCount - 1)
                if let known, known.snapshot.utf8.elementsEqual(snapshot) {
                    pages.unchanged.add(1, ordering: .relaxed)
                    return (known.json, known.nextCursor, known.digest)
                }
                let generation = pages.generation(ofSnapshot: snapshot)
                // Kept at this very snapshot already, by a read that shared this statement
                // (one page asked by many at once, just after a write): written from it.
                if let generation, let page = pages.page(key, generation: generation), let json = page.json ?? rendering.write(page) {
                    return (json, page.nextCursor, page.digest)
                }
                var kept: PageCache.Page? = PageCache.Page()
                let page = try write(rows.isNull(rendering.idIndex) ? rows : ReplayedRows(rows), &kept)
                guard let generation, let kept, kept.isComplete else { return (page.json, page.nextCursor, nil) }
                return (page.json, page.nextCursor, pages.keep(key, kept, json: page.json, nextCursor: page.nextCursor, generation: generation))
            }, completion: done)
    }

    private func renderedList(
        _ request: ListRequest, after cursor: ListCursor?, kept: inout PageCache.Page?
    ) throws
        -> (json: [UInt8], nextCursor: String?)
    {
        if request.search != nil, request.order != .distance {
            return try renderedList(request, kept: &kept) { db in try searchQuery(db, request, after: cursor) }
        }
        if request.order == .distance, let near = request.near {
            let after = if case let .real(distance)? = cursor?.key { distance } else { 0.0 }
            var ring = max(Self.firstRing, after * 2)
            while ring < near.radiusMeters {
                var narrowed = request
                narrowed.areas = request.areas.map { area in
                    if case .near = area { .near(latitude: near.latitude, longitude: near.longitude, radiusMeters: ring) } else { area }
                }
                let query = try listQuery(narrowed, after: cursor)
                let page = try renderedList(request, kept: &kept) { _ in query }
                if page.nextCursor != nil { return page }
                ring *= 8
            }
        }
        let query = try listQuery(request, after: cursor)
        return try renderedList(request, kept: &kept) { _ in query }
    }

    /// The radius of the first ring a list by distance looks in, in meters.
    static var firstRing: Double { 10_000 }

    /// The most rows of a plain list's page (``SQLDialect/limited(_:order:atMost:)``): the
    /// largest page the API asks for and the row that tells whether another follows. A
    /// larger page (none the API asks for) is limited by its bound limit alone.
    static var plainListBound: Int { ListRequest.maxLimit + 1 }

    /// One page of `request` from what `query` makes of the database (it may narrow the
    /// request, or read to choose its rows first: then from the same snapshot); `kept`
    /// (when given) receives what makes the page (``PageCache``), or `nil` when it cannot be kept.
    private func renderedList(
        _ request: ListRequest, kept: inout PageCache.Page?, _ query: (any SQLConnection) throws -> (String, SQLArguments)
    )
        throws(StoreError) -> (json: [UInt8], nextCursor: String?)
    {
        let epoch = RenderCache.currentEpoch
        return try guarded {
            if let parent = request.scope?.parent {
                // The parent and the page from one snapshot.
                return try database.snapshot { db in
                    guard try db.exists("SELECT 1 FROM \(parent.table) WHERE id = ?", [parent.id.rawValue]) else { throw StoreError.notFound }
                    return try renderList(db, request, query(db), epoch: epoch, kept: &kept)
                }
            }
            if request.search != nil {
                // Its counts, kept lists and page from one snapshot, where the engine keeps them
                // (SQLite); elsewhere the page alone.
                return try database.oneStatementSnapshot { db in try renderList(db, request, query(db), epoch: epoch, kept: &kept) }
            }
            return try database.read { db in try renderList(db, request, query(db), epoch: epoch, kept: &kept) }
        }
    }

    private func renderList(
        _ db: any SQLConnection, _ request: ListRequest, _ query: (String, SQLArguments), epoch: UInt64,
        kept: inout PageCache.Page?
    ) throws -> (json: [UInt8], nextCursor: String?) {
        var writer = JSONWriter(capacity: 256 + request.limit * 512)
        if kept != nil { kept = PageCache.Page() }
        let next = try renderList(db, request, query, epoch: epoch, into: &writer, kept: &kept)
        return (writer.bytes, next)
    }

    /// Writes the first page of `request` as `db` sees it (for embedding in another resource).
    func renderList(_ db: any SQLConnection, _ request: ListRequest, epoch: UInt64, into writer: inout JSONWriter) throws {
        var kept: PageCache.Page?
        _ = try renderList(db, request, listQuery(request, after: nil), epoch: epoch, maxBytes: .max, into: &writer, kept: &kept)
    }

    /// Writes a page; returns the next page's cursor.
    private func renderList(
        _ db: any SQLConnection, _ request: ListRequest, _ query: (String, SQLArguments), epoch: UInt64,
        maxBytes: Int = ListRequest.maxPageBytes, into writer: inout JSONWriter, kept: inout PageCache.Page?
    ) throws -> String? {
        try rendering.page(
            db.query(query.0, query.1), request, fingerprint: { fingerprint(request) }, epoch: epoch, maxBytes: maxBytes,
            into: &writer, kept: &kept)
    }

    /// Decodes the request's cursor and checks that it was made by this list: same
    /// table, order and filters, an id, and a key of the kind the order sorts by.
    private func decodeCursor(_ request: ListRequest) throws(StoreError) -> ListCursor? {
        guard let text = request.cursor else { return nil }
        let cursor = try ListCursor(decoding: text, fingerprint: fingerprint(request))
        let keyFits: Bool =
            switch (request.order, cursor.key) {
            case let (.field(name, _), .integer): integerSorts.contains(name)
            case let (.field(name, _), .text): !integerSorts.contains(name)
            case let (.relevance, .real(value)), let (.distance, .real(value)): value.isFinite
            default: false
            }
        guard keyFits, CatalogID(cursor.id) != nil else { throw .invalidCursor("The cursor is malformed.") }
        return cursor
    }

    /// What a cursor of `request` is bound to: this table, the order and the filters.
    private func fingerprint(_ request: ListRequest) -> String {
        schema.table + "|" + request.fingerprint
    }

    /// The statement of a page of `request` after `cursor` (a search's from the index, with
    /// the search the resource's shape makes of its text).
    func listQuery(_ request: ListRequest, after cursor: ListCursor?) throws(StoreError) -> (String, SQLArguments) {
        try listQuery(request, after: cursor, way: .index, search: request.search.flatMap { sqlSearch($0, queued: searchesQueue) })
    }

    /// Builds `SELECT * FROM (rows with their sort_key) WHERE keyset ORDER BY sort_key, id LIMIT n+1`
    /// (a plain list's within a constant bound too: ``SQLDialect/limited(_:order:atMost:)``).
    /// Plain lists seek straight to the cursor on the (column, id) index, so a page costs
    /// the same at any depth; filtered lists sort only their matches.
    /// `search` is the request's search (``sqlSearch(_:queued:)``), which reads the search
    /// index's queue when its shape does (``searchState(_:)``). `unlessUnchanged`: a
    /// plain list's statement reads nothing when the database is at the snapshot bound
    /// after the list's arguments (``SQLDialect/unlessUnchanged(_:)``). The text comes from the
    /// shape of the statement, made once (``ListStatements``); the arguments are this list's.
    func listQuery(
        _ request: ListRequest, after cursor: ListCursor?, way: SearchWay, search: SQLSearch?, unlessUnchanged: Bool = false
    ) throws(StoreError) -> (
        String, SQLArguments
    ) {
        var from = schema.table + " t"
        var filters: [String] = []
        var outerFilters: [String] = []
        var arguments: SQLArguments = []
        let (keyExpression, keyArguments, descending) = try sortKey(request, search: search)
        var shapeWay = ListShape.Way.plain
        if let search {
            switch way {
            case .index, .ordered:
                shapeWay = if case .ordered = way { .ordered } else { .index }
                from = search.shape.from ?? from
                filters.append(search.shape.filter)
                arguments += search.filterArguments
            case .walk:
                guard search.shape.match != nil else { throw .unavailable("This engine cannot walk a search.") }
                shapeWay = .walk
            case let .rows(pks):
                shapeWay = .rows
                // Looked up one by one (no temporary index of the list, as `IN` would build).
                from = rowsFrom
                filters.append("t.pk = found.value")
                arguments.append("[" + pks.map(String.init).joined(separator: ",") + "]")
            }
        } else if request.search != nil, schema.searchTable != nil {
            filters.append("FALSE")
        }
        // The filters and arguments from here on are the list's own, beside its search's.
        let (searchFilters, searchArguments) = (filters.count, arguments.count)
        if let scope = request.scope {
            guard schema.scopes.contains(scope.kind) else { throw .invalidCursor("This list cannot be scoped that way.") }
            filters.append(scope.filter)
            arguments.append(scope.id.rawValue)
        }
        if case let .user(user) = request.viewer, let visibleFilter, let hidden = schema.ownership?.hiddenWhen {
            filters.append(visibleFilter)
            arguments += [hidden.value, user?.rawValue ?? ""]
        }
        for area in request.areas {
            let (filter, filterArguments) = Geo.filter(area, database.dialect)
            filters.append(filter)
            arguments += filterArguments
        }
        var outerArguments: SQLArguments = []
        if let (_, _, radius) = request.near {
            outerFilters.append("sort_key <= ?")
            outerArguments.append(radius)
        }
        if let cursor {
            outerFilters.append(descending ? "(sort_key, id) < (?, ?)" : "(sort_key, id) > (?, ?)")
            outerArguments += [cursor.key.sqlValue, cursor.id]
        }
        let shape = ListShape(
            way: shapeWay, from: from, filters: filters, searchFilters: searchFilters, outerFilters: outerFilters, key: keyExpression,
            descending: descending, relevance: request.order == .relevance, distance: request.order == .distance,
            queued: search?.shape.pending != nil,
            bounded: search == nil && request.order != .distance && request.limit < Self.plainListBound,
            unlessUnchanged: unlessUnchanged && search == nil)
        let sql = listStatements.text(shape) { listText($0, search: search?.shape) }
        guard let search else { return (sql, keyArguments + arguments + outerArguments + [request.limit + 1]) }
        switch way {
        case .walk:
            if request.order == .relevance { return (sql, keyArguments + arguments) }
            return (sql, keyArguments + search.matchArguments + arguments + outerArguments)
        case .index, .ordered, .rows:
            var candidateArguments = keyArguments + arguments
            if shapeWay != .rows, search.shape.pending != nil, search.shape.match != nil {
                candidateArguments += keyArguments + search.matchArguments + arguments[searchArguments...]
            }
            if case .ordered = way { return (sql, candidateArguments) }
            // `.rows` holds the page already (at most `limit + 1`): no limit to bind.
            return (sql, candidateArguments + outerArguments + (shapeWay == .rows ? [] : [request.limit + 1]))
        }
    }

    /// The text of the list statements of `shape` (``listQuery(_:after:way:search:)``, whose
    /// arguments follow its `?` in order), where `search` is the SQL of its search, if any.
    private func listText(_ shape: ListShape, search: SQLSearchShape?) -> String {
        let direction = shape.descending ? "DESC" : "ASC"
        let order = "ORDER BY sort_key \(direction), id \(direction)"
        let columns = shape.distance ? listColumns.distance : listColumns.plain
        let revision = renderer.revision.map { ", t.\($0) AS \($0)" } ?? ""
        let filter = shape.filters.isEmpty ? "" : " WHERE " + shape.filters.joined(separator: " AND ")
        let outerFilter = shape.outerFilters.isEmpty ? "" : " WHERE " + shape.outerFilters.joined(separator: " AND ")
        let (from, keyExpression) = (shape.from, shape.key)
        guard let search, shape.way != .plain else {
            let page = "SELECT \(columns), t.sort_key FROM (SELECT t.*\(revision), \(keyExpression) AS sort_key FROM \(from)\(filter)) t\(outerFilter)"
            let text = shape.bounded ? database.dialect.limited(page, order: order, atMost: Self.plainListBound) : "\(page) \(order) LIMIT ?"
            return shape.unlessUnchanged ? database.dialect.unlessUnchanged(text) ?? text : text
        }
        if shape.way == .walk {
            if shape.relevance {
                // The newest rows first, each with its rank (NULL when it does not match).
                return "SELECT t.pk, t.id, \(keyExpression) FROM \(from)\(filter) ORDER BY t.pk DESC LIMIT \(Self.walkLimit)"
            }
            return "SELECT candidate, hit FROM (SELECT t.pk AS candidate, t.id AS id, \(keyExpression) AS sort_key, \(search.match ?? "NULL") AS hit"
                + " FROM \(from)\(filter)) c\(outerFilter) \(order) LIMIT \(Self.walkLimit)"
        }
        // A search chooses its page from ids and sort keys alone, and reads only the page's
        // rows whole. Relevance ranks the newest matches only: a bounded amount of work
        // however many rows match.
        var candidates = "SELECT t.pk AS candidate, t.id AS id, \(keyExpression) AS sort_key FROM \(from)\(filter)"
        if shape.way != .rows {
            if shape.relevance { candidates += " ORDER BY \(search.newestFirst) LIMIT \(Self.rankedCandidates)" }
            if let pending = search.pending, let match = search.match {
                // The rows whose index writes wait in the queue, which the index's matches
                // leave out, tested as they are read.
                candidates =
                    "SELECT * FROM (\(candidates)) UNION ALL SELECT t.pk, t.id, \(keyExpression) FROM \(schema.table) t WHERE "
                    + ([pending, match] + shape.filters[shape.searchFilters...]).joined(separator: " AND ")
                if shape.relevance { candidates = "SELECT * FROM (\(candidates)) ORDER BY candidate DESC LIMIT \(Self.rankedCandidates)" }
            }
        }
        if shape.way == .ordered {
            return "SELECT candidate FROM (\(candidates)) c \(order) LIMIT \(SearchLists.listLimit + 1)"
        }
        // Exactly the page's rows are read whole, each by its key as the page yields it (no
        // temporary table of the page). The outer query sorts them again unless the engine
        // keeps the sorted page's order through the join (``SQLDialect/keepsCrossJoinOrder``).
        // `.rows` holds the page already (at most `limit + 1`): no top-n sort to keep.
        var page = "SELECT candidate, sort_key, id FROM (\(candidates)) c\(outerFilter)"
        if shape.way != .rows { page += " \(order) LIMIT ?" }
        let joined =
            "SELECT \(columns), t.sort_key FROM (SELECT t.*\(revision), p.sort_key FROM (\(page)) p"
            + " CROSS JOIN \(schema.table) t WHERE t.pk = p.candidate) t"
        return shape.way != .rows && database.dialect.keepsCrossJoinOrder ? joined : "\(joined) \(order)"
    }

    /// The sort key of `request`'s order over a row of `t` (its `?` bound to `arguments`),
    /// and whether the list runs down it.
    func sortKey(
        _ request: ListRequest, search: SQLSearch?
    ) throws(StoreError)
        -> (expression: String, arguments: SQLArguments, descending: Bool)
    {
        switch request.order {
        case let .field(name, descending):
            guard let column = sortColumns[name] else { throw .invalidCursor("Cannot sort by \(name).") }
            return (integerSorts.contains(name) ? "t.\(column)" : database.dialect.caseFoldedKey("t.\(column)"), [], descending)
        case .relevance:
            guard request.search != nil, schema.searchTable != nil else { throw .invalidCursor("Relevance order needs a search.") }
            // Text without a letter or digit searches for nothing: no rank to compute.
            guard let search else { return ("0.0", [], false) }
            return (search.shape.rank, search.rankArguments, false)
        case .distance:
            guard let point = request.near else { throw .invalidCursor("Distance order needs a point.") }
            return (Geo.distanceSQL(database.dialect), [point.latitude, point.latitude, point.longitude], false)
        }
    }
}
