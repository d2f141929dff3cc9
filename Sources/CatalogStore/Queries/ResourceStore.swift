import CatalogModels
import CatalogSchema
import Foundation
import Synchronization

/// A resource as its JSON document, rendered from its row.
public struct RenderedResource: Sendable {
    /// The resource's id.
    public let id: CatalogID
    /// Its version (the `ETag` is this number in quotes).
    public let version: Int
    /// The JSON document, byte for byte what the Codable model encodes to.
    public let json: [UInt8]

    /// A resource whose document is `json`.
    package init(id: CatalogID, version: Int, json: [UInt8]) {
        self.id = id
        self.version = version
        self.json = json
    }
}

/// A related list embedded in a resource's JSON (`include=…`), rendered from the same
/// read snapshot as the resource.
public struct Embedding: Sendable {
    /// The member's key, quoted, with its colon.
    let key: [UInt8]
    /// Writes the member's value for the resource with this id, as the viewer may see it
    /// (the render-cache epoch read before the snapshot began comes along).
    let render: @Sendable (any SQLConnection, CatalogID, Viewer, UInt64, inout JSONWriter) throws -> Void

    init(_ name: String, render: @escaping @Sendable (any SQLConnection, CatalogID, Viewer, UInt64, inout JSONWriter) throws -> Void) {
        key = RenderedField.key(name)
        self.render = render
    }
}

/// What a resource's table does beyond its declaration: the lists within a related
/// resource it offers, and what deleting one of its rows changes besides the row and
/// its foreign-key cascades.
struct Relations: Sendable {
    /// The filter (SQL over the table aliased `t`, with one `?` for the scope's id) of
    /// the lists within `scope`; `nil` when the scope does not apply.
    var filter: @Sendable (ListScope) -> String? = { _ in nil }
    /// Runs before the row of `id` is deleted, in the same transaction.
    var willDelete: (@Sendable (any SQLConnection, CatalogID) throws -> Void)?
    /// What an import of the resource does beyond the generic upsert.
    var importing = ImportRules()
    /// Runs after the row of `id` is changed by an edit, in the same transaction.
    var didUpdate: (@Sendable (any SQLConnection, CatalogID) throws -> Void)?
}

/// The operations every resource supports, derived from its declaration
/// (``ResourceSchema``): reads rendered straight from the statement, keyset lists,
/// and durable writes of the values its body reader produced. `Model` and `Input` are
/// the resource's wire types, for callers that want typed values.
public final class ResourceStore<Model: Codable & Sendable & Hashable, Input: Encodable & Sendable>: Sendable {
    /// The resource's declaration.
    package let schema: ResourceSchema
    let database: any SQLDatabase
    /// How its rows become JSON.
    let rendering: ResourceRendering
    /// How densely recent searches matched (``walksSearch(_:)``).
    private let searchDensities = SearchDensities()
    /// The matches of recent searches, in order (``keptQuery(_:_:after:walks:)``).
    private let searchLists = SearchLists()
    var renderer: RowRenderer { rendering.renderer }
    /// Renderings of whole rows by id and version, for resources that cache them.
    var cache: RenderCache? { rendering.cache }
    /// List pages as their items' keys in ``cache``, for resources that cache renderings.
    let pages: PageCache?
    let relations: Relations
    private let insertSQL: String
    /// Whether the resource's index writes wait in a queue that searches read too
    /// (SQLite's `search_index_queue`, from `Migrations/0007`; ``SQLDialect/search(_:text:queued:)``).
    private let searchesQueue: Bool
    /// The same INSERT without `RETURNING`, and which of its arguments each column the
    /// renderer reads is (`nil`: NULL), where the renderer reads only columns a creation
    /// writes (SQLite, whose rows have no revision to read back): a created row then
    /// renders from the values bound (``BoundRow``), sparing the writer SQLite's
    /// `RETURNING`: about 0.9 µs of the writer's 24 a create (`Benchmarks/writer.sh`).
    let boundInsert: (sql: String, arguments: [Int?])?
    private let updateSQL: String
    /// ` RETURNING …`: the renderer's columns, for writes that render the row they write.
    let returning: String
    /// The members a creation and an edit write, by index, in the order of their SQL.
    private let creationMembers: [Int]
    private let editMembers: [Int]
    private let renderedSelectSQL: String
    /// The same for many ids, ending where the dialect's JSON elements of the ids go.
    private let renderedManySQL: String
    /// The same, for a viewer who sees only what is not hidden and what they own.
    private let visibleSelectSQL: String?
    /// The filter of hidden rows a restricted viewer does not own (over `t`; the hidden value, then the viewer's id).
    private let visibleFilter: String?
    /// The writable fields of a row (the document a merge patch applies to), then its
    /// version and, for resources that can be frozen, the freezing flag.
    private let editable: (renderer: RowRenderer, sql: String)
    private let sortColumns: [String: String]
    /// The sorts whose keys are integers (times); the others sort text, without regard to case.
    private let integerSorts: Set<String>
    /// The select lists of list queries: plain, and with the distance column filled.
    private let listColumns: (plain: String, distance: String)

    init(_ schema: ResourceSchema, database: any SQLDatabase, relations: Relations = Relations()) {
        self.schema = schema
        self.database = database
        self.relations = relations
        searchesQueue = schema.searchTable != nil && database.dialect == .sqlite && ((try? database.read { db in
            try db.fetchValue("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_index_queue')", []).bool
        }) ?? false)
        let renderer = RowRenderer(schema.members, revision: schema.cachesRenderings ? database.dialect.rowRevision : nil)
        rendering = ResourceRendering(renderer: renderer, cache: schema.cachesRenderings ? RenderCache() : nil)
        pages = schema.cachesRenderings ? PageCache() : nil
        let creation = schema.creationColumns, edit = schema.editColumns
        creationMembers = creation.map(\.index)
        editMembers = edit.map(\.index)
        // Writes return the written row, rendered like a read, without a second query.
        let returning = " RETURNING " + Self.selectList(renderer, distance: nil, qualifier: "")
        self.returning = returning
        let columns = ["id"] + creation.map(\.column) + ["created_at", "updated_at", "version"] + (schema.ownership.map { [$0.owner] } ?? [])
        insertSQL = insertStatement(schema.table, columns) + returning
        boundInsert = Self.boundArguments(renderer, inserted: columns).map { (insertStatement(schema.table, columns), $0) }
        let assignments = edit.map { "\($0.column) = ?" } + ["updated_at = \(database.dialect.greatest)(?, created_at)", "version = version + 1"]
        updateSQL = "UPDATE \(schema.table) SET \(assignments.joined(separator: ", ")) WHERE id = ?" + returning
        renderedSelectSQL = "SELECT \(Self.selectList(renderer, distance: nil)) FROM \(schema.table) t WHERE id = ?"
        renderedManySQL = "SELECT \(Self.selectList(renderer, distance: nil)) FROM \(schema.table) t WHERE id IN (SELECT j.value FROM "
        if let ownership = schema.ownership, let hidden = ownership.hiddenWhen {
            let filter = "(t.\(hidden.column) != ? OR t.\(ownership.owner) = ?)"
            visibleFilter = filter
            visibleSelectSQL = renderedSelectSQL + " AND " + filter
        } else {
            visibleFilter = nil
            visibleSelectSQL = nil
        }
        let editableRenderer = RowRenderer(schema.members.filter { $0.access == .writable })
        let editableColumns = editableRenderer.selectList(own: \.column) + ["version"] + (schema.frozen.map { [$0.column] } ?? [])
        editable = (editableRenderer, "SELECT \(editableColumns.joined(separator: ", ")) FROM \(schema.table) WHERE id = ?" + database.dialect.forUpdate)
        let sortable = schema.sortableFields.compactMap { name in schema.members.first { $0.name == name } }
        precondition(sortable.allSatisfy { $0.column != nil }, "A sortable field is a column.")
        sortColumns = Dictionary(uniqueKeysWithValues: sortable.map { ($0.name, $0.column ?? $0.name) })
        integerSorts = Set(sortable.filter { field in
            switch field.kind {
            case .integer, .timestamp: true
            default: false
            }
        }.map(\.name))
        listColumns = (Self.selectList(renderer, distance: nil), Self.selectList(renderer, distance: "t.sort_key"))
    }

    /// For each column `renderer` reads, its place among the `inserted` columns (`nil` for
    /// the distance column, NULL outside a distance-ordered list); `nil` when it reads
    /// any other column (an embedded object's, a revision).
    private static func boundArguments(_ renderer: RowRenderer, inserted: [String]) -> [Int?]? {
        let unknown = "\u{0}"
        var places: [Int?] = []
        for column in renderer.selectList(own: \.column, nested: { _ in unknown }) {
            if column == ResourceSchema.distanceColumn {
                places.append(nil)
            } else if let place = inserted.firstIndex(of: column) {
                places.append(place)
            } else {
                return nil
            }
        }
        return places
    }

    /// The renderer's columns; the distance column is the sort key in distance-ordered
    /// lists and NULL elsewhere.
    private static func selectList(_ renderer: RowRenderer, distance: String?, qualifier: String = "t.") -> String {
        renderer.selectList(own: { field in
            field.column == ResourceSchema.distanceColumn ? "\(distance ?? "NULL") AS \(field.column)" : qualifier + field.column
        }).joined(separator: ", ")
    }

    /// The API names of the resource's fields, sorted.
    public var fieldNames: [String] { renderer.fieldNames }

    /// The mask showing `names` (and `id`); `nil` when one of them is not a field.
    public func mask(_ names: Set<String>) -> FieldMask? { renderer.mask(names) }

    // MARK: Reads

    /// The resource with `id` as its JSON document, with its version; `nil` when absent.
    /// Rendered straight from the statement: the fast path for `GET /…/{id}`.
    /// With `embedding`, the related lists are read from the same snapshot as the resource.
    /// A `viewer` other than `.everything` finds hidden resources it does not own absent.
    public func rendered(_ id: CatalogID, fields: FieldMask = .all, embedding: [Embedding] = [], viewer: Viewer = .everything) throws(StoreError)
        -> RenderedResource? {
        if embedding.isEmpty {
            return try guarded { try database.read { db in try render(db, id, fields: fields, viewer: viewer) } }
        }
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                // Each member is read and written when the resource's row reaches its key.
                let members = embedding.map { embedding in
                    EmbeddedMember(key: embedding.key) { writer in try embedding.render(db, id, viewer, epoch, &writer) }
                }
                return try render(db, id, fields: fields, embedded: members.sorted { $0.key.lexicographicallyPrecedes($1.key) }, viewer: viewer)
            }
        }
    }

    /// Renders the row of `id` as read by `db` (inside a write transaction, what it will commit).
    func render(_ db: any SQLConnection, _ id: CatalogID, fields: FieldMask = .all, embedded: [EmbeddedMember] = [], viewer: Viewer = .everything) throws
        -> RenderedResource? {
        let rows = if case let .user(user) = viewer, let visibleSelectSQL, let hidden = schema.ownership?.hiddenWhen {
            try db.query(visibleSelectSQL, [id.rawValue, hidden.value, user?.rawValue ?? ""])
        } else {
            try db.query(renderedSelectSQL, [id.rawValue])
        }
        return try rendering.one(rows, id: id, fields: fields, embedded: embedded)
    }

    /// The resources `ids` (whole, as everyone who sees them sees them), by id, in one
    /// query; those gone are missing.
    func render(_ db: any SQLConnection, ids: [CatalogID]) throws -> [CatalogID: RenderedResource] {
        guard !ids.isEmpty else { return [:] }
        let rows = try db.query(renderedManySQL + db.dialect.jsonElements("j") + ")", [JSONArrayParameter.text(ids.lazy.map(\.rawValue), quoted: true)])
        return try rendering.all(rows)
    }

    /// One page of the list described by `request`, as models.
    public func list(_ request: ListRequest) throws(StoreError) -> ListPage<Model> {
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
            if let page = pages.page(key, generation: generation), let json = rendering.write(page) { return (json, page.nextCursor, page.digest) }
            keeping = (pages, key, generation)
        }
        let cursor = try decodeCursor(request)
        var kept = keeping.map { _ in PageCache.Page() }
        // One budget for all the rings: interrupted once their reads together take too long.
        let page = try guarded { try ReadBudget.run { try renderedList(request, after: cursor, kept: &kept) } }
        guard let keeping, var kept, kept.isComplete else { return (page.json, page.nextCursor, nil) }
        kept.nextCursor = page.nextCursor
        kept.digest = Digest.of(page.json)
        keeping.pages.store(keeping.key, kept, generation: keeping.generation)
        return (page.json, page.nextCursor, kept.digest)
    }

    private func renderedList(_ request: ListRequest, after cursor: ListCursor?, kept: inout PageCache.Page?) throws
        -> (json: [UInt8], nextCursor: String?) {
        let walks = try walksSearch(request)
        if keepsMatches(request, walks: walks) {
            return try renderedList(request, kept: &kept) { db in try keptQuery(db, request, after: cursor, walks: walks) }
        }
        if walks {
            return try renderedList(request, kept: &kept) { db in try walkedQuery(db, request, after: cursor) }
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

    /// One page of `request` from what `query` makes of the database (it may narrow the
    /// request, or read to choose its rows first: then from the same snapshot); `kept`
    /// (when given) receives what makes the page (``PageCache``), or `nil` when it cannot be kept.
    private func renderedList(_ request: ListRequest, kept: inout PageCache.Page?, _ query: (any SQLConnection) throws -> (String, SQLArguments))
        throws(StoreError) -> (json: [UInt8], nextCursor: String?) {
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
                return try database.snapshot { db in try renderList(db, request, query(db), epoch: epoch, kept: &kept) }
            }
            return try database.read { db in try renderList(db, request, query(db), epoch: epoch, kept: &kept) }
        }
    }

    private func renderList(_ db: any SQLConnection, _ request: ListRequest, _ query: (String, SQLArguments), epoch: UInt64,
                            kept: inout PageCache.Page?) throws -> (json: [UInt8], nextCursor: String?) {
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
    private func renderList(_ db: any SQLConnection, _ request: ListRequest, _ query: (String, SQLArguments), epoch: UInt64,
                            maxBytes: Int = ListRequest.maxPageBytes, into writer: inout JSONWriter, kept: inout PageCache.Page?) throws -> String? {
        try rendering.page(db.query(query.0, query.1), request, fingerprint: { fingerprint(request) }, epoch: epoch, maxBytes: maxBytes,
                           into: &writer, kept: &kept)
    }

    /// Decodes the request's cursor and checks that it was made by this list: same
    /// table, order and filters, an id, and a key of the kind the order sorts by.
    private func decodeCursor(_ request: ListRequest) throws(StoreError) -> ListCursor? {
        guard let text = request.cursor else { return nil }
        let cursor = try ListCursor(decoding: text, fingerprint: fingerprint(request))
        let keyFits: Bool = switch (request.order, cursor.key) {
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

    /// How many of the newest matches of a search a list by relevance ranks.
    static var rankedCandidates: Int { 500 }

    /// How many of the newest rows a search tests to see how densely it matches.
    static var searchSample: Int { 256 }

    /// The most rows a search's walk reads (``walkedQuery(_:_:after:)``).
    static var walkLimit: Int { 4_000 }

    /// Whether the search of `request` first walks the list's order, testing rows as it
    /// reads them (SQLite, ``SQLDialect/search(_:text:queued:)``'s `match`), rather than looking
    /// its matches up in the full-text index, which hands over every match to be sorted
    /// (and, for a prefix of a common word, merges their postings first): when at least
    /// a quarter of the newest rows match, for relevance (whose 500 candidates a walk of
    /// the newest rows then finds in some thousand rows); when at least one in 64 does,
    /// for a sorted list (whose page a walk along the sort's index then fills). A
    /// search's count is kept for a while, so the next pages of a search (and a popular
    /// one) skip the sample.
    private func walksSearch(_ request: ListRequest) throws -> Bool {
        guard let text = request.search, request.order != .distance,
              let sample = database.dialect.searchSample(schema, sample: Self.searchSample) else { return false }
        let terms = SearchQuery.terms(text)
        let matches = try searchDensities.matches(terms) {
            try database.read { db in try db.fetchValue(sample, [terms]).int ?? 0 }
        }
        return matches >= (request.order == .relevance ? Self.searchSample / 4 : Self.searchSample / 64)
    }

    /// The page of a search that walks: the walk reads at most ``walkLimit`` rows in the
    /// list's order (newest first for relevance) and stops once it holds the page (the
    /// candidates, for relevance, which it ranks as it reads them). If it found them, or
    /// reached the end, the page is made from exactly those rows; if they lie further
    /// than the walk goes (matches that cluster elsewhere in the order), the search looks
    /// them up in the index after all. Either way it finds what the index would: a walk
    /// only bounds the work.
    private func walkedQuery(_ db: any SQLConnection, _ request: ListRequest, after cursor: ListCursor?) throws -> (String, SQLArguments) {
        if request.order == .relevance {
            guard var candidates = try walkedCandidates(db, request) else { return try listQuery(request, after: cursor) }
            // The page: the best-ranked candidates after the cursor.
            if let cursor, case let .real(rank) = cursor.key {
                let after = (rank: rank, id: Array(cursor.id.utf8))
                candidates.removeAll { !Self.precedes(after, ($0.rank, $0.id)) }
            }
            return try listQuery(request, after: cursor, way: .rows(candidates.prefix(request.limit + 1).map(\.pk)))
        }
        let walk = try listQuery(request, after: cursor, way: .walk)
        let rows = try db.query(walk.0, walk.1)
        var read = 0
        var found: [Int64] = []
        while found.count <= request.limit, try rows.step() {
            read += 1
            if rows.integer(1) != 0 { found.append(rows.integer(0)) }
        }
        if found.count <= request.limit, read == Self.walkLimit { return try listQuery(request, after: cursor) }
        return try listQuery(request, after: cursor, way: .rows(found))
    }

    /// Whether the matches of a search are kept in their list's order (``keptQuery(_:_:after:walks:)``):
    /// where the engine can tell, within a snapshot, that nothing has changed since they
    /// were read (SQLite), for searches not within a parent; sorted searches only when
    /// they do not walk (a walk finds a page, not every match, and is cheap).
    private func keepsMatches(_ request: ListRequest, walks: Bool) -> Bool {
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
    /// list does, until the next write. Only a first page reads the list; the page after a
    /// cursor starts after the cursor's row, found in the list with the key it still has.
    /// A later page with no list for this version, a cursor whose row has moved, or one
    /// past what the list holds, runs as before (a walk, or the index). Either way the
    /// page holds what the index would give.
    private func keptQuery(_ db: any SQLConnection, _ request: ListRequest, after cursor: ListCursor?, walks: Bool) throws -> (String, SQLArguments) {
        // The way the search runs unkept: never dearer than before there were kept lists.
        func unkept() throws -> (String, SQLArguments) {
            try walks ? walkedQuery(db, request, after: cursor) : listQuery(request, after: cursor)
        }
        guard let versionSQL = db.dialect.writeVersion, let version = try db.fetchValue(versionSQL).int64 else { return try unkept() }
        // Who lists matters only where some rows are hidden from some viewers.
        let key = visibleFilter == nil ? request.fingerprint : "\(request.viewer)|\(request.fingerprint)"
        let matches: SearchLists.Matches
        if let kept = searchLists.matches(key, version: version) {
            matches = kept
        } else if cursor == nil {
            // Only a first page reads them all: a later page after a write costs what it did.
            var pks: [Int64] = []
            if walks, let candidates = try walkedCandidates(db, request) {
                pks = candidates.map(\.pk)
            } else {
                let ordered = try listQuery(request, after: nil, way: .ordered)
                let rows = try db.query(ordered.0, ordered.1)
                while try rows.step() { pks.append(rows.integer(0)) }
            }
            matches = searchLists.keep(key, version: version, pks: pks)
        } else {
            return try unkept()
        }
        var start = 0
        if let cursor {
            // The cursor's row, if its sort key is still the cursor's (equal as the order compares).
            let key = try sortKey(request, search: request.search.flatMap { db.dialect.search(schema, text: $0, queued: searchesQueue) })
            guard let pk = try db.fetchValue("SELECT t.pk FROM \(schema.table) t WHERE \(key.expression) = ? AND t.id = ?",
                                             key.arguments + [cursor.key.sqlValue, cursor.id]).int64,
                  let index = matches.pks.firstIndex(of: pk) else { return try unkept() }
            start = index + 1
        }
        let end = start + request.limit + 1
        guard end <= matches.pks.count || matches.complete else { return try unkept() }
        return try listQuery(request, after: cursor, way: .rows(Array(matches.pks[start ..< min(end, matches.pks.count)])))
    }

    /// The candidates of a search by relevance, found by a walk of the newest rows that
    /// ranks them as it reads them, best first (ties by id); `nil` when the walk read
    /// ``walkLimit`` rows without finding them all.
    private func walkedCandidates(_ db: any SQLConnection, _ request: ListRequest) throws -> [(rank: Double, id: [UInt8], pk: Int64)]? {
        let walk = try listQuery(request, after: nil, way: .walk)
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
    private static func precedes(_ a: (rank: Double, id: [UInt8]), _ b: (rank: Double, id: [UInt8])) -> Bool {
        a.rank != b.rank ? a.rank < b.rank : a.id.lexicographicallyPrecedes(b.id)
    }

    /// How a list finds the matches of its search.
    enum SearchWay {
        /// In the full-text index.
        case index
        /// Testing each row read along the list's order: the walk of ``walkedQuery(_:_:after:)``,
        /// which answers `(pk, matches)` rows, or `(pk, id, rank or NULL)` for relevance.
        case walk
        /// Exactly these rows (by `pk`), which a walk or a kept list found.
        case rows([Int64])
        /// The `pk` of every match (at most ``SearchLists/listLimit``), in the list's
        /// order, from the index: what ``keptQuery(_:_:after:walks:)`` keeps.
        case ordered
    }

    /// Builds `SELECT * FROM (rows with their sort_key) WHERE keyset ORDER BY sort_key, id LIMIT n+1`.
    /// Plain lists seek straight to the cursor on the (column, id) index, so a page costs
    /// the same at any depth; filtered lists sort only their matches.
    private func listQuery(_ request: ListRequest, after cursor: ListCursor?, way: SearchWay = .index) throws(StoreError) -> (String, SQLArguments) {
        var from = "\(schema.table) t"
        var filters: [String] = []
        var outerFilters: [String] = []
        var arguments: SQLArguments = []
        let dialect = database.dialect
        let search = request.search.flatMap { dialect.search(schema, text: $0, queued: searchesQueue) }
        let (keyExpression, keyArguments, descending) = try sortKey(request, search: search)

        if let search {
            switch way {
            case .index, .ordered:
                from = search.from ?? from
                filters.append(search.filter)
                arguments += Self.repeated(search.filterQuery, for: search.filter)
            case .walk:
                break
            case let .rows(pks):
                filters.append("t.pk IN (SELECT value FROM \(dialect.jsonElements("found")))")
                arguments.append("[" + pks.map(String.init).joined(separator: ",") + "]")
            }
        } else if request.search != nil, schema.searchTable != nil {
            filters.append("FALSE")
        }
        // The filters and arguments from here on are the list's own, beside its search's.
        let (searchFilters, searchArguments) = (filters.count, arguments.count)
        if let scope = request.scope {
            guard let filter = relations.filter(scope) else { throw .invalidCursor("This list cannot be scoped that way.") }
            filters.append(filter)
            arguments.append(scope.id.rawValue)
        }
        if case let .user(user) = request.viewer, let visibleFilter, let hidden = schema.ownership?.hiddenWhen {
            filters.append(visibleFilter)
            arguments += [hidden.value, user?.rawValue ?? ""]
        }
        for area in request.areas {
            let (filter, filterArguments) = Geo.filter(area, dialect)
            filters.append(filter)
            arguments += filterArguments
        }
        var outerArguments: SQLArguments = []
        if let (_, _, radius) = request.near {
            outerFilters.append("sort_key <= ?")
            outerArguments.append(radius)
        }
        if let cursor {
            outerFilters.append("(sort_key, id) \(descending ? "<" : ">") (?, ?)")
            outerArguments += [cursor.key.sqlValue, cursor.id]
        }
        let direction = descending ? "DESC" : "ASC"
        let order = "ORDER BY sort_key \(direction), id \(direction)"
        let columns = request.order == .distance ? listColumns.distance : listColumns.plain
        let revision = renderer.revision.map { ", t.\($0) AS \($0)" } ?? ""
        let filter = filters.isEmpty ? "" : " WHERE " + filters.joined(separator: " AND ")
        let outerFilter = outerFilters.isEmpty ? "" : " WHERE " + outerFilters.joined(separator: " AND ")
        guard let search else {
            let sql = "SELECT \(columns), t.sort_key FROM (SELECT t.*\(revision), \(keyExpression) AS sort_key FROM \(from)\(filter)) t\(outerFilter) \(order) LIMIT ?"
            return (sql, keyArguments + arguments + outerArguments + [request.limit + 1])
        }
        if case .walk = way {
            guard let match = search.match else { throw .unavailable("This engine cannot walk a search.") }
            if request.order == .relevance {
                // The newest rows first, each with its rank (NULL when it does not match).
                let sql = "SELECT t.pk, t.id, \(keyExpression) FROM \(from)\(filter) ORDER BY t.pk DESC LIMIT \(Self.walkLimit)"
                return (sql, keyArguments + arguments)
            }
            let sql = "SELECT candidate, hit FROM (SELECT t.pk AS candidate, t.id AS id, \(keyExpression) AS sort_key, \(match.expression) AS hit"
                + " FROM \(from)\(filter)) c\(outerFilter) \(order) LIMIT \(Self.walkLimit)"
            return (sql, keyArguments + Self.repeated(match.query, for: match.expression) + arguments + outerArguments)
        }
        // A search chooses its page from ids and sort keys alone, and reads only the page's
        // rows whole. Relevance ranks the newest matches only: a bounded amount of work
        // however many rows match.
        var candidates = "SELECT t.pk AS candidate, t.id AS id, \(keyExpression) AS sort_key FROM \(from)\(filter)"
        var candidateArguments = keyArguments + arguments
        switch way {
        case .index, .ordered:
            if request.order == .relevance { candidates += " ORDER BY \(search.newestFirst) LIMIT \(Self.rankedCandidates)" }
            if let pending = search.pending, let match = search.match {
                // The rows whose index writes wait in the queue, which the index's matches
                // leave out, tested as they are read.
                candidates = "SELECT * FROM (\(candidates)) UNION ALL SELECT t.pk, t.id, \(keyExpression) FROM \(schema.table) t WHERE "
                    + ([pending, match.expression] + filters[searchFilters...]).joined(separator: " AND ")
                candidateArguments += keyArguments + Self.repeated(match.query, for: match.expression) + arguments[searchArguments...]
                if request.order == .relevance { candidates = "SELECT * FROM (\(candidates)) ORDER BY candidate DESC LIMIT \(Self.rankedCandidates)" }
            }
        case .walk, .rows:
            break
        }
        if case .ordered = way {
            return ("SELECT candidate FROM (\(candidates)) c \(order) LIMIT \(SearchLists.listLimit + 1)", candidateArguments)
        }
        let page = "SELECT candidate, sort_key, id FROM (\(candidates)) c\(outerFilter) \(order) LIMIT ?"
        let sql = "SELECT \(columns), t.sort_key FROM (SELECT t.*\(revision), p.sort_key FROM (\(page)) p"
            + " JOIN \(schema.table) t ON t.pk = p.candidate) t \(order)"
        return (sql, candidateArguments + outerArguments + [request.limit + 1])
    }

    /// The sort key of `request`'s order over a row of `t` (its `?` bound to `arguments`),
    /// and whether the list runs down it.
    private func sortKey(_ request: ListRequest, search: SQLDialect.Search?) throws(StoreError)
        -> (expression: String, arguments: SQLArguments, descending: Bool) {
        switch request.order {
        case let .field(name, descending):
            guard let column = sortColumns[name] else { throw .invalidCursor("Cannot sort by \(name).") }
            return (integerSorts.contains(name) ? "t.\(column)" : database.dialect.caseFoldedKey("t.\(column)"), [], descending)
        case .relevance:
            guard request.search != nil, schema.searchTable != nil else { throw .invalidCursor("Relevance order needs a search.") }
            // Text without a letter or digit searches for nothing: no rank to compute.
            guard let search else { return ("0.0", [], false) }
            return (search.rank, Self.repeated(search.rankQuery, for: search.rank), false)
        case .distance:
            guard let point = request.near else { throw .invalidCursor("Distance order needs a point.") }
            return (Geo.distanceSQL(database.dialect), [point.latitude, point.latitude, point.longitude], false)
        }
    }

    /// `value` once for each `?` of `sql`.
    private static func repeated(_ value: String, for sql: String) -> SQLArguments {
        Array(repeating: value, count: sql.utf8.count(where: { $0 == UInt8(ascii: "?") }))
    }

    // MARK: Writes (durable when the completion runs)

    /// Creates a resource from `values`, read by the declaration's ``ResourceSchema/creation``
    /// reader, owned by `owner` when the resource has owners.
    package func create(_ values: FieldValues, owner: CatalogID? = nil, completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        // The id is drawn here, on the caller's thread: the writer's time goes to the database.
        let id = CatalogID()
        submit(completion) { [self] db in try insert(db, values, owner: owner, at: Timestamp.milliseconds(Date()), id: id) }
    }

    /// Inserts a new resource `id` with `values` (and `owner`, when the resource has
    /// owners), created at `time`, and renders it.
    func insert(_ db: any SQLConnection, _ values: FieldValues, owner: CatalogID? = nil, at time: Int64, id: CatalogID = CatalogID()) throws -> RenderedResource {
        if let ownership = schema.ownership, let quota = ownership.quota, let owner {
            // The owner's row is locked first, so that concurrent creations count one after another.
            _ = try db.exists("SELECT 1 FROM users WHERE id = ?" + db.dialect.forUpdate, [owner.rawValue])
            if try db.fetchValue("SELECT count(*) FROM \(schema.table) WHERE \(ownership.owner) = ?", [owner.rawValue]).int ?? 0 >= quota {
                throw StoreError.quotaExceeded("A user may own at most \(quota) \(schema.noun)s; delete one first.")
            }
        }
        let ownerArgument: SQLArguments = schema.ownership == nil ? [] : [owner?.rawValue]
        let inserted = [id.rawValue] + arguments(values, creationMembers) + [time, time, 1] + ownerArgument
        guard let boundInsert else { return try renderWritten(db, insertSQL, inserted) }
        try db.execute(boundInsert.sql, inserted)
        return try rendering.written(BoundRow(boundInsert.arguments.map { $0.map { inserted[$0].sqlValue } ?? .null }))
    }

    /// Who owns the resource `id` (of a resource users own) and whether it is hidden;
    /// `nil` when it does not exist, or the resource has no owners.
    public func ownership(of id: CatalogID) throws(StoreError) -> (owner: CatalogID?, hidden: Bool)? {
        guard let ownership = schema.ownership else { return nil }
        let hidden = ownership.hiddenWhen.map { "\($0.column) = ?" } ?? "FALSE"
        let arguments: SQLArguments = ownership.hiddenWhen.map { [$0.value, id.rawValue] } ?? [id.rawValue]
        return try guarded {
            try database.read { db in try db.fetchRow("SELECT \(ownership.owner), \(hidden) FROM \(schema.table) WHERE id = ?", arguments) }
        }.map { row in (row[0].string.flatMap(CatalogID.init), row[1].bool) }
    }

    /// Creates a resource from `input`, checked by the same reader and rules as a body
    /// (`invalid` lists what breaks them).
    public func create(_ input: Input, completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        switch readValues(input, schema.creation) {
        case let .success(values): create(values, completion: completion)
        case let .failure(error): completion(.failure(error))
        }
    }

    /// Replaces the resource `id` with `values` (read by ``ResourceSchema/edit``), if `preconditions` hold.
    package func replace(_ id: CatalogID, with values: FieldValues, preconditions: WritePreconditions,
                         completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        update(id, preconditions: preconditions, completion: completion) { _ in values }
    }

    /// Replaces the resource `id` with `input`, checked as a body, if `preconditions` hold.
    public func replace(_ id: CatalogID, with input: Input, preconditions: WritePreconditions,
                        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        switch readValues(input, schema.edit) {
        case let .success(values): replace(id, with: values, preconditions: preconditions, completion: completion)
        case let .failure(error): completion(.failure(error))
        }
    }

    /// Changes the resource `id` to what `transform` makes of its current editable
    /// document (its writable fields), inside the write transaction, so concurrent
    /// changes cannot interleave. An error thrown by `transform` fails the call with that
    /// same error. A frozen resource (a comment tombstone) is a `conflict`.
    package func update(_ id: CatalogID, preconditions: WritePreconditions, completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void,
                        transform: @escaping @Sendable ([String: JSONValue]) throws -> FieldValues) {
        submit(atomic: relations.didUpdate != nil, completion) { [self] db in
            let (document, version) = try editableDocument(db, id)
            // The content is checked first (422 before 412), as for PUT, whose body is
            // validated before it reaches the store.
            let values = try transform(document)
            try preconditions.check(current: version)
            let written = try renderWritten(db, updateSQL, arguments(values, editMembers) + [Timestamp.milliseconds(Date()), id.rawValue])
            try relations.didUpdate?(db, id)
            return written
        }
    }

    /// The writable fields of the row `id` as a JSON object, and its version.
    private func editableDocument(_ db: any SQLConnection, _ id: CatalogID) throws -> ([String: JSONValue], Int) {
        let rows = try db.query(editable.sql, [id.rawValue])
        guard try rows.step() else { throw StoreError.notFound }
        let columns = editable.renderer.columnCount
        if let frozen = schema.frozen, rows.integer(columns + 1) != 0 { throw StoreError.conflict(frozen.detail) }
        var writer = JSONWriter()
        try editable.renderer.render(rows, into: &writer)
        guard case let .object(document)? = try? JSONValue.parse(writer.bytes) else { throw StoreError.unavailable("A row did not render as an object.") }
        return (document, Int(rows.integer(columns)))
    }

    /// Deletes the resource `id`, if `preconditions` hold.
    public func delete(_ id: CatalogID, preconditions: WritePreconditions, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        submit(atomic: relations.willDelete != nil, { [cache] result in
            if case .success = result { cache?.invalidate(id: id.rawValue) }
            completion(result)
        }) { [self] db in
            let current = try db.fetchValue("SELECT version FROM \(schema.table) WHERE id = ?" + db.dialect.forDelete, [id.rawValue]).int
            try preconditions.check(current: current)
            try relations.willDelete?(db, id)
            try db.execute("DELETE FROM \(schema.table) WHERE id = ?", [id.rawValue])
        }
    }

    /// The values of `members`, as statement arguments.
    func arguments(_ values: FieldValues, _ members: [Int]) -> SQLArguments {
        members.map { values.values[$0]?.sqlValue ?? .null }
    }

    /// How many resources exist.
    public func count() throws(StoreError) -> Int {
        try guarded { try database.read { db in try db.fetchValue("SELECT count(*) FROM \(schema.table)").int ?? 0 } }
    }

    /// Runs an INSERT or UPDATE … RETURNING and renders the row it returns.
    func renderWritten(_ db: any SQLConnection, _ sql: String, _ arguments: SQLArguments) throws -> RenderedResource {
        try rendering.written(db.query(sql, arguments))
    }

    /// Submits a write. Database errors reach `completion` as ``StoreError``; errors
    /// thrown by the caller's own code (a transform) pass through unchanged.
    func submit<T: Sendable>(atomic: Bool = false, _ completion: @escaping @Sendable (Result<T, any Error>) -> Void,
                             _ work: @escaping (any SQLConnection) throws -> T) {
        database.submit(atomic: atomic, work) { result in
            completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 })
        }
    }
}

extension FieldValue {
    /// The value as the database keeps it (lists are not columns).
    var sqlValue: SQLValue {
        switch self {
        case .null, .ids, .documents: .null
        case let .text(text): .text(text)
        case let .real(number): .real(number)
        case let .integer(number): .integer(number)
        }
    }
}

/// `input` read as a document of `shape`: what a body of its JSON would give, so typed
/// callers (the demo catalog, tests) keep the same rules as requests.
func readValues(_ input: some Encodable, _ shape: DocumentShape) -> Result<FieldValues, StoreError> {
    guard let json = try? CatalogJSON.makeEncoder().encode(input), case let .object(object)? = try? JSONValue.parse(json) else {
        return .failure(.invalid([Violation(.invalidType, "The input does not encode as a JSON object.").at("")]))
    }
    let (values, errors) = shape.read(object)
    return errors.isEmpty ? .success(values) : .failure(.invalid(errors.listed))
}

/// `INSERT INTO table (columns) VALUES (?, …)`.
func insertStatement(_ table: String, _ columns: [String]) -> String {
    "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
}
