import CatalogModels
import CatalogSchema
import Foundation

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
    /// Whether the member is the reader's own (``reader`` of ``ResourceStore/rendered(_:fields:embedding:viewer:reader:)``):
    /// an anonymous caller cannot ask for it.
    public let isReaders: Bool
    /// Writes the member's value for the resource with this id, as the viewer may see it
    /// (the reader, and the render-cache epoch read before the snapshot began, come along).
    let render: @Sendable (any SQLConnection, CatalogID, Viewer, CatalogID?, UInt64, inout JSONWriter) throws -> Void

    init(
        _ name: String, isReaders: Bool = false,
        render: @escaping @Sendable (any SQLConnection, CatalogID, Viewer, CatalogID?, UInt64, inout JSONWriter) throws -> Void
    ) {
        key = RenderedField.key(name)
        self.isReaders = isReaders
        self.render = render
    }
}

/// What a resource's table does beyond its declaration: what deleting one of its rows, an
/// edit or an import changes besides the row and its foreign-key cascades.
struct Relations: Sendable {
    /// Runs before the row of `id` is deleted, in the same transaction.
    var willDelete: (@Sendable (any SQLConnection, CatalogID) throws -> Void)?
    /// What an import of the resource does beyond the generic upsert.
    var importing = ImportRules()
    /// Runs after the row of `id` is changed by an edit, in the same transaction.
    var didUpdate: (@Sendable (any SQLConnection, CatalogID) throws -> Void)?
}

/// The operations every resource supports, derived from its declaration
/// (``ResourceSchema``): reads rendered straight from the statement, keyset lists,
/// and durable writes of the values its body reader produced. Not generic: one store
/// serves every resource; callers that want typed values name the wire type they read
/// (``list(_:as:)``) or write (``create(_:options:completion:)``).
public final class ResourceStore: Sendable {
    /// The resource's declaration.
    package let schema: ResourceSchema
    let database: any SQLDatabase
    /// How its rows become JSON.
    let rendering: ResourceRendering
    /// How densely recent searches matched (``walksSearch(_:_:_:version:)``).
    let searchDensities = SearchDensities()
    /// The matches of recent searches, in order (``searchQuery(_:_:after:)``).
    let searchLists = SearchLists()
    /// The SQL of a search's sample (``SQLDialect/searchSample(_:sample:)``), made once,
    /// and the words of the sampled rows, which count most samples without it.
    let sampling: (sql: (floor: String, count: String), words: SampleWords)?
    /// The texts of its list statements, by shape (``listQuery(_:after:way:search:)``).
    let listStatements = ListStatements()
    var renderer: RowRenderer { rendering.renderer }
    /// Renderings of whole rows by id and version, for resources that cache them.
    var cache: RenderCache? { rendering.cache }
    /// List pages as their items' keys in ``cache``, for resources that cache renderings.
    let pages: PageCache?
    /// ``pages`` where the loops keep them by snapshot (PostgreSQL: ``SQLDialect/unlessUnchanged(_:)``).
    let loopPages: PageCache?
    let relations: Relations
    let insertSQL: String
    /// Whether the resource's index writes wait in a queue that searches read too
    /// (SQLite's `search_index_queue`, from `Migrations/0007`; ``SQLDialect/searchShape(_:queued:)``).
    let searchesQueue: Bool
    /// Whether the queue holds writes and the ``SQLDialect/writeVersion``, read in one
    /// statement (``searchState(_:)``), where searches read the queue and the engine has versions.
    let searchStateSQL: String?
    /// The SQL of the resource's searches, without and with the queue's rows: made once
    /// (``sqlSearch(_:queued:)``).
    let searchShapes: (unqueued: SQLSearchShape?, queued: SQLSearchShape?)
    /// The same INSERT without `RETURNING`, and which of its arguments each column the
    /// renderer reads is (`nil`: NULL), where the renderer reads only columns a creation
    /// writes: a created row then renders from the values bound (``BoundRow``), sparing
    /// the writer SQLite's `RETURNING` (about 0.9 µs of the writer's 24 a create,
    /// `Benchmarks/writer.sh`), and letting PostgreSQL's writer send the insert on without
    /// waiting for it (``SQLConnection/insertDeferred(_:_:)``).
    let boundInsert: (insert: RowInsert, arguments: [Int?])?
    let updateSQL: String
    /// Sets the image's JSON (``ResourceSchema/image``), as a change of the resource.
    let imageSQL: String
    /// ` RETURNING …`: the renderer's columns, for writes that render the row they write.
    let returning: String
    /// The members a creation and an edit write, by index, in the order of their SQL.
    let creationMembers: [Int]
    let editMembers: [Int]
    let renderedSelectSQL: String
    /// The same for many ids, ending where the dialect's JSON elements of the ids go.
    let renderedManySQL: String
    /// The same, for a viewer who sees only what is not hidden and what they own.
    let visibleSelectSQL: String?
    /// The filter of hidden rows a restricted viewer does not own (over `t`; the hidden value, then the viewer's id).
    let visibleFilter: String?
    /// The writable fields of a row (the document a merge patch applies to), then its
    /// version and, for resources that can be frozen, the freezing flag.
    let editable: (renderer: RowRenderer, sql: String)
    let sortColumns: [String: String]
    /// The sorts whose keys are integers (times); the others sort text, without regard to case.
    let integerSorts: Set<String>
    /// The select lists of list queries: plain, and with the distance column filled.
    let listColumns: (plain: String, distance: String)
    /// The `FROM` of a page whose rows a search chose by `pk` (bound as one JSON array).
    let rowsFrom: String

    init(_ schema: ResourceSchema, database: any SQLDatabase, relations: Relations = Relations()) {
        self.schema = schema
        self.database = database
        self.relations = relations
        searchesQueue =
            schema.searchTable != nil && database.dialect.queuesSearchIndexWrites
            && ((try? database.read { db in
                try db.fetchValue("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_index_queue')", []).bool
            }) ?? false)
        searchStateSQL =
            searchesQueue ? database.dialect.writeVersion.map { "SELECT (\($0)), EXISTS (SELECT 1 FROM search_index_queue LIMIT 1)" } : nil
        searchShapes = (database.dialect.searchShape(schema, queued: false), database.dialect.searchShape(schema, queued: true))
        sampling = database.dialect.searchSample(schema, sample: Self.searchSample).map { sql in
            (sql, SampleWords(table: schema.table, columns: schema.searchColumns.map(\.column), rows: Self.searchSample))
        }
        let renderer = RowRenderer(schema.members, revision: schema.cachesRenderings ? database.dialect.rowRevision : nil)
        rendering = ResourceRendering(renderer: renderer, cache: schema.cachesRenderings ? RenderCache() : nil)
        let pages = schema.cachesRenderings ? PageCache() : nil
        self.pages = pages
        loopPages = database.dialect.unlessUnchanged("") == nil ? nil : pages
        let creation = schema.creationColumns, edit = schema.editColumns
        creationMembers = creation.map(\.index)
        editMembers = edit.map(\.index)
        // Writes return the written row, rendered like a read, without a second query.
        let returning = " RETURNING " + Self.selectList(renderer, distance: nil, qualifier: "")
        self.returning = returning
        let columns =
            ["id"] + creation.map(\.column) + ["created_at", "updated_at", "version"] + (schema.ownership.map { [$0.owner] } ?? [])
            + SchemaField.counts.compactMap { schema.counted ? $0.column : nil }
        insertSQL = insertStatement(schema.table, columns) + returning
        // Columns only the server sets, later, are NULL in a created row (an image).
        let nullAtCreation = Set(schema.members.filter { $0.access == .serverSet && $0.nullable && $0.defaultValue == nil }.compactMap(\.column))
        boundInsert = Self.boundArguments(renderer, inserted: columns, null: nullAtCreation).map { (RowInsert(schema.table, columns), $0) }
        let assignments = edit.map { "\($0.column) = ?" } + ["updated_at = \(database.dialect.greatest)(?, created_at)", "version = version + 1"]
        updateSQL = "UPDATE \(schema.table) SET \(assignments.joined(separator: ", ")) WHERE id = ?" + returning
        imageSQL =
            "UPDATE \(schema.table) SET \(ImageSlot.column) = ?, updated_at = \(database.dialect.greatest)(?, created_at), version = version + 1 WHERE id = ?"
            + returning
        renderedSelectSQL = "SELECT \(Self.selectList(renderer, distance: nil)) FROM \(schema.table) t WHERE id = ?"
        renderedManySQL = "SELECT \(Self.selectList(renderer, distance: nil)) FROM \(schema.table) t WHERE " + database.dialect.isAmong("id")
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
        integerSorts = Set(
            sortable.filter { field in
                switch field.kind {
                case .integer, .timestamp: true
                default: false
                }
            }.map(\.name))
        listColumns = (Self.selectList(renderer, distance: nil), Self.selectList(renderer, distance: "t.sort_key"))
        rowsFrom = "\(database.dialect.jsonElements("found")) CROSS JOIN \(schema.table) t"
    }

    /// For each column `renderer` reads, its place among the `inserted` columns (`nil` for
    /// the distance column, NULL outside a distance-ordered list; for the revision, which
    /// only the render cache reads, and a written row's answer is not kept there; and for
    /// the `null` columns); `nil` when it reads any other column (an embedded object's).
    private static func boundArguments(_ renderer: RowRenderer, inserted: [String], null: Set<String>) -> [Int?]? {
        let unknown = "\u{0}"
        var places: [Int?] = []
        for column in renderer.selectList(own: \.column, nested: { _ in unknown }) {
            if column == ResourceSchema.distanceColumn || column == renderer.revision || (null.contains(column) && !inserted.contains(column)) {
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
    /// Rendered straight from the statement: the fast path for `GET /…/{id}`. A whole
    /// resource that caches renderings is served from its render cache, with no query,
    /// while nothing has committed since a read found it there (``SQLDatabase/generation()``).
    /// With `embedding`, the related lists are read from the same snapshot as the resource.
    /// A `viewer` other than `.everything` finds hidden resources it does not own absent;
    /// `reader` is the signed-in caller, whose own state embeddings show.
    public func rendered(
        _ id: CatalogID, fields: FieldMask = .all, embedding: [Embedding] = [], viewer: Viewer = .everything, reader: CatalogID? = nil
    ) throws(StoreError)
        -> RenderedResource?
    {
        if embedding.isEmpty {
            // A whole resource that no commit has touched since a read found it comes from
            // the render cache, with no query (where the engine tells generations apart:
            // SQLite). Elsewhere its row is read, and written from the cache when the cache
            // holds it at the row's version and revision (PostgreSQL's `xmin`).
            if fields == .all, let cache = rendering.cache, visibleFilter == nil || viewer == .everything {
                let generation = try? database.generation()
                if let generation, let resource = rendering.current(id, generation: generation) { return resource }
                let epoch = RenderCache.currentEpoch
                return try guarded {
                    try database.read { db in
                        try rendering.one(try db.query(renderedSelectSQL, [id.rawValue]), id: id, cache: cache, confirming: generation, epoch: epoch)
                    }
                }
            }
            return try guarded { try database.read { db in try render(db, id, fields: fields, viewer: viewer) } }
        }
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                // Each member is read and written when the resource's row reaches its key.
                let members = embedding.map { embedding in
                    EmbeddedMember(key: embedding.key) { writer in try embedding.render(db, id, viewer, reader, epoch, &writer) }
                }
                return try render(db, id, fields: fields, embedded: members.sorted { $0.key.lexicographicallyPrecedes($1.key) }, viewer: viewer)
            }
        }
    }

    /// ``rendered(_:fields:embedding:viewer:reader:)`` without embeddings, read from
    /// `reactor`'s event loop without blocking it where reads wait on a network
    /// (PostgreSQL): `completion` runs on the loop with the resource (`nil` when absent),
    /// or with ``LoopReadOutcome/elsewhere`` when the read must run on a thread that may
    /// wait (a lost connection, say). False, having started nothing, when it cannot be read
    /// so (SQLite, embeddings, a loop whose line is full): call
    /// ``rendered(_:fields:embedding:viewer:reader:)`` then.
    public func renderedOnLoop(
        _ id: CatalogID, fields: FieldMask = .all, viewer: Viewer = .everything, reactor: any ReadReactor,
        isAbandoned: @escaping () -> Bool, completion: @escaping (LoopReadOutcome<RenderedResource?>) -> Void
    ) -> Bool {
        let rendering = rendering
        let sql: String
        let arguments: SQLArguments
        let body: (any SQLRows) throws -> RenderedResource?
        // A read of the row alone may share a statement with the loop's other reads by id.
        var sharing: LoopReadSharing? = .byKey(sql: renderedManySQL, key: id, column: rendering.idIndex)
        if case let .user(user) = viewer, let visibleSelectSQL, let hidden = schema.ownership?.hiddenWhen {
            sharing = nil
            (sql, arguments) = (visibleSelectSQL, [id.rawValue, hidden.value, user?.rawValue ?? ""])
            body = { rows in try rendering.one(rows, id: id, fields: fields, embedded: []) }
        } else if fields == .all, let cache = rendering.cache {
            // Written from the render cache when it holds the row's version and revision.
            let epoch = RenderCache.currentEpoch
            (sql, arguments) = (renderedSelectSQL, [id.rawValue])
            body = { rows in try rendering.one(rows, id: id, cache: cache, confirming: nil, epoch: epoch) }
        } else {
            (sql, arguments) = (renderedSelectSQL, [id.rawValue])
            body = { rows in try rendering.one(rows, id: id, fields: fields, embedded: []) }
        }
        return database.readOnLoop(reactor, sql, arguments, sharing: sharing, isAbandoned: isAbandoned, body) { outcome in
            guard let outcome else { return completion(.elsewhere) }
            completion(.done(outcome.mapError { StoreError.from($0) }))
        }
    }

    /// Renders the row of `id` as read by `db` (inside a write transaction, what it will commit).
    func render(
        _ db: any SQLConnection, _ id: CatalogID, fields: FieldMask = .all, embedded: [EmbeddedMember] = [], viewer: Viewer = .everything
    ) throws
        -> RenderedResource?
    {
        let rows =
            if case let .user(user) = viewer, let visibleSelectSQL, let hidden = schema.ownership?.hiddenWhen {
                try db.query(visibleSelectSQL, [id.rawValue, hidden.value, user?.rawValue ?? ""])
            } else {
                try db.query(renderedSelectSQL, [id.rawValue])
            }
        return try rendering.one(rows, id: id, fields: fields, embedded: embedded)
    }

    /// Whether the resource `id` exists and `viewer` may see it, as `db` reads it.
    func isVisible(_ db: any SQLConnection, _ id: CatalogID, viewer: Viewer) throws -> Bool {
        if case let .user(user) = viewer, let visibleFilter, let hidden = schema.ownership?.hiddenWhen {
            return try db.exists("SELECT 1 FROM \(schema.table) t WHERE id = ? AND " + visibleFilter, [id.rawValue, hidden.value, user?.rawValue ?? ""])
        }
        return try db.exists("SELECT 1 FROM \(schema.table) WHERE id = ?", [id.rawValue])
    }

    /// The resources `ids` (whole, as everyone who sees them sees them), by id, in one
    /// query; those gone, and those hidden from `viewer`, are missing.
    func render(_ db: any SQLConnection, ids: [CatalogID], viewer: Viewer = .everything) throws -> [CatalogID: RenderedResource] {
        guard !ids.isEmpty else { return [:] }
        var sql = renderedManySQL
        var arguments: SQLArguments = [JSONArrayParameter.text(ids.lazy.map(\.rawValue), quoted: true)]
        if case let .user(user) = viewer, let visibleFilter, let hidden = schema.ownership?.hiddenWhen {
            sql += " AND " + visibleFilter
            arguments += [hidden.value, user?.rawValue ?? ""]
        }
        return try rendering.all(db.query(sql, arguments))
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

/// `input` read by `shape` (``readValues(_:_:)``), for a typed write: `nil` once its errors
/// have gone to `completion`.
func readValues<T>(_ input: some Encodable, _ shape: DocumentShape, failing completion: @Sendable (Result<T, any Error>) -> Void) -> FieldValues? {
    switch readValues(input, shape) {
    case let .success(values): return values
    case let .failure(error):
        completion(.failure(error))
        return nil
    }
}

/// `INSERT INTO table (columns) VALUES (?, …)`.
