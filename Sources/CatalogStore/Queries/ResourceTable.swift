import CatalogModels
import Foundation
import GRDB
import GRDBSQLite

/// How one resource maps to its table. Every table has `pk`, `id`, `created_at`,
/// `updated_at` and `version` besides the resource's own columns.
protocol ResourceTable: Sendable {
    associatedtype Model: Sendable
    associatedtype Input: Sendable

    /// The table's name.
    static var table: String { get }
    /// The resource's own columns, in the order of ``values(_:)``.
    static var dataColumns: [String] { get }
    /// Sortable API field names and their columns.
    static var sortColumns: [String: String] { get }
    /// The FTS5 table over the resource, and its column weights for `bm25`.
    static var search: (table: String, weights: String)? { get }

    /// Renders rows straight to the model's JSON.
    static var renderer: RowRenderer { get }

    /// The column values of `input`, in the order of ``dataColumns``.
    static func values(_ input: Input) -> [(any DatabaseValueConvertible)?]
    /// The model in `row` (a `SELECT *` of the table, possibly with `sort_key`).
    static func model(_ row: Row) -> Model

    /// The filter (SQL over the table aliased `t`, with one `?` for the scope's id) of
    /// the lists of this resource within `scope`; `nil` when the scope does not apply.
    static func filter(_ scope: ListRequest.Scope) -> String?
    /// Runs before the row of `id` is deleted, in the same transaction: the changes a
    /// deletion makes beyond the row and its foreign-key cascades.
    static func willDelete(_ db: Database, id: CatalogID) throws
    /// Whether ``willDelete(_:id:)`` writes, so the deletion needs a savepoint.
    static var deletionWritesMore: Bool { get }
    /// Whether renderings are worth caching (resources listed and embedded often).
    static var cachesRenderings: Bool { get }
}

extension ResourceTable {
    static func filter(_ scope: ListRequest.Scope) -> String? { nil }
    static func willDelete(_ db: Database, id: CatalogID) throws {}
    static var deletionWritesMore: Bool { false }
    static var cachesRenderings: Bool { false }
}

extension ResourceTable {
    static var insertSQL: String {
        let columns = ["id"] + dataColumns + ["created_at", "updated_at", "version"]
        return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
    }

    static var updateSQL: String {
        let assignments = dataColumns.map { "\($0) = ?" } + ["updated_at = max(?, created_at)", "version = version + 1"]
        return "UPDATE \(table) SET \(assignments.joined(separator: ", ")) WHERE id = ?"
    }

    static var selectByID: String { "SELECT * FROM \(table) WHERE id = ?" }

    /// Reads the columns every resource has.
    static func meta(_ row: Row) -> (id: CatalogID, createdAt: Date, updatedAt: Date, version: Int) {
        let id = CatalogID(row["id"] as String) ?? CatalogID()
        return (id, Timestamp.date(milliseconds: row["created_at"]), Timestamp.date(milliseconds: row["updated_at"]), row["version"])
    }
}

/// A resource as its JSON document, rendered from its row.
public struct RenderedResource: Sendable {
    /// The resource's id.
    public let id: CatalogID
    /// Its version (the `ETag` is this number in quotes).
    public let version: Int
    /// The JSON document, byte for byte what the Codable model encodes to.
    public let json: [UInt8]
}

/// A related list embedded in a resource's JSON (`include=…`), rendered from the same
/// read snapshot as the resource.
public struct Embedding: Sendable {
    /// The member's key, quoted, with its colon.
    let key: [UInt8]
    /// Writes the member's value for the resource with this id (the render-cache epoch
    /// read before the snapshot began comes along).
    let render: @Sendable (Database, CatalogID, UInt64, inout JSONWriter) throws -> Void

    init(_ name: String, render: @escaping @Sendable (Database, CatalogID, UInt64, inout JSONWriter) throws -> Void) {
        key = RenderedField.key(name)
        self.render = render
    }
}

/// The operations every resource supports, over any ``ResourceTable``.
public final class ResourceStore<Model: Sendable, Input: Sendable>: Sendable {
    let database: CatalogDatabase
    private let table: String
    private let insertSQL: String
    private let updateSQL: String
    private let selectSQL: String
    private let sortColumns: [String: String]
    private let search: (table: String, weights: String)?
    private let values: @Sendable (Input) -> [(any DatabaseValueConvertible)?]
    private let decode: @Sendable (Row) -> Model
    let renderer: RowRenderer
    private let renderedSelectSQL: String
    private let scopeFilter: @Sendable (ListRequest.Scope) -> String?
    private let willDelete: @Sendable (Database, CatalogID) throws -> Void
    private let deletionWritesMore: Bool
    /// Renderings of whole rows by id and version, for tables that cache them.
    let cache: RenderCache?
    private let versionIndex: Int32
    /// The select lists of list queries: plain, and with the distance column filled.
    private let listColumns: (plain: String, distance: String)
    private let idIndex: Int32

    init<Table: ResourceTable>(_ table: Table.Type, database: CatalogDatabase) where Table.Model == Model, Table.Input == Input {
        self.database = database
        self.table = Table.table
        // Writes return the written row, rendered like a read, without a second query.
        let returning = " RETURNING " + Self.selectList(Table.renderer, distance: nil, qualifier: "")
        insertSQL = Table.insertSQL + returning
        updateSQL = Table.updateSQL + returning
        selectSQL = Table.selectByID
        sortColumns = Table.sortColumns
        search = Table.search
        values = { Table.values($0) }
        decode = { Table.model($0) }
        renderer = Table.renderer
        versionIndex = Table.renderer.index(of: "version")
        listColumns = (Self.selectList(Table.renderer, distance: nil), Self.selectList(Table.renderer, distance: "t.sort_key"))
        idIndex = Table.renderer.index(of: "id")
        renderedSelectSQL = "SELECT \(Self.selectList(Table.renderer, distance: nil)) FROM \(Table.table) t WHERE id = ?"
        scopeFilter = { Table.filter($0) }
        willDelete = { try Table.willDelete($0, id: $1) }
        deletionWritesMore = Table.deletionWritesMore
        cache = Table.cachesRenderings ? RenderCache() : nil
    }

    /// The renderer's columns; the distance column is the sort key in distance-ordered
    /// lists and NULL elsewhere.
    private static func selectList(_ renderer: RowRenderer, distance: String?, qualifier: String = "t.") -> String {
        renderer.columns.map { $0 == Geo.distanceColumn ? "\(distance ?? "NULL") AS \($0)" : qualifier + $0 }.joined(separator: ", ")
    }

    /// The API names of the fields lists can sort by.
    public var sortableFields: [String] { sortColumns.keys.sorted() }

    /// Whether lists accept full-text search.
    public var isSearchable: Bool { search != nil }

    /// The API names of the resource's fields, sorted.
    public var fieldNames: [String] { renderer.fieldNames }

    /// The mask showing `names` (and `id`); `nil` when one of them is not a field.
    public func mask(_ names: Set<String>) -> FieldMask? { renderer.mask(names) }

    // MARK: Reads

    /// The resource with `id` as its JSON document, with its version; `nil` when absent.
    /// Rendered straight from the statement: the fast path for `GET /…/{id}`.
    /// With `embedding`, the related lists are read from the same snapshot as the resource.
    public func rendered(_ id: CatalogID, fields: FieldMask = .all, embedding: [Embedding] = []) throws(StoreError) -> RenderedResource? {
        if embedding.isEmpty {
            return try guarded { try database.read { db in try render(db, id, fields: fields) } }
        }
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                // Each member is read and written when the resource's row reaches its key.
                let members = embedding.map { embedding in
                    EmbeddedMember(key: embedding.key) { writer in try embedding.render(db, id, epoch, &writer) }
                }
                return try render(db, id, fields: fields, embedded: members.sorted { $0.key.lexicographicallyPrecedes($1.key) })
            }
        }
    }

    /// Renders the row of `id` as read by `db` (inside a write transaction, what it will commit).
    func render(_ db: Database, _ id: CatalogID, fields: FieldMask = .all, embedded: [EmbeddedMember] = []) throws -> RenderedResource? {
        let rows = try RawRows(db, sql: renderedSelectSQL, arguments: [id.rawValue])
        guard try rows.step() else { return nil }
        var writer = JSONWriter(capacity: embedded.isEmpty ? 512 : 16_384)
        try renderer.render(rows.statement, into: &writer, mask: fields, embedded: embedded)
        return RenderedResource(id: id, version: Int(sqlite3_column_int64(rows.statement, versionIndex)), json: writer.bytes)
    }

    /// One page of the list described by `request`.
    public func list(_ request: ListRequest) throws(StoreError) -> ListPage<Model> {
        let (rows, next) = try listRows(request)
        return ListPage(items: rows.map(decode), nextCursor: next)
    }

    /// One page as the JSON document of a `Page` (`{"items":[…],"nextCursor":"…"}`),
    /// rendered straight from the statement: the fast path for list endpoints.
    public func renderedList(_ request: ListRequest) throws(StoreError) -> (json: [UInt8], nextCursor: String?) {
        let query = try listQuery(request, after: decodeCursor(request))
        let epoch = RenderCache.currentEpoch
        return try guarded {
            if let parent = request.scope?.parent {
                // The parent and the page from one snapshot.
                return try database.snapshot { db in
                    guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM \(parent.table) WHERE id = ?"),
                                            arguments: [parent.id.rawValue]) != nil else { throw StoreError.notFound }
                    return try renderList(db, request, query, epoch: epoch)
                }
            }
            return try database.read { db in try renderList(db, request, query, epoch: epoch) }
        }
    }

    private func renderList(_ db: Database, _ request: ListRequest, _ query: (String, [(any DatabaseValueConvertible)?]), epoch: UInt64) throws
        -> (json: [UInt8], nextCursor: String?) {
        var writer = JSONWriter(capacity: 256 + request.limit * 512)
        let next = try renderList(db, request, query, epoch: epoch, into: &writer)
        return (writer.bytes, next)
    }

    /// Writes the first page of `request` as `db` sees it (for embedding in another resource).
    func renderList(_ db: Database, _ request: ListRequest, epoch: UInt64, into writer: inout JSONWriter) throws {
        _ = try renderList(db, request, listQuery(request, after: nil), epoch: epoch, into: &writer)
    }

    /// Writes a page; returns the next page's cursor.
    private func renderList(_ db: Database, _ request: ListRequest, _ query: (String, [(any DatabaseValueConvertible)?]), epoch: UInt64,
                            into writer: inout JSONWriter) throws -> String? {
        let (sql, arguments) = query
        let sortKeyIndex = Int32(renderer.fields.count)
        let rows = try RawRows(db, sql: sql, arguments: StatementArguments(arguments))
        return try rows.writePage(limit: request.limit, into: &writer, item: { [renderer, cache] sqlite, writer in
            if let cache, request.fields == .all {
                try renderer.render(sqlite, into: &writer, cache: cache, epoch: epoch)
            } else {
                try renderer.render(sqlite, into: &writer, mask: request.fields)
            }
        }, cursor: { [idIndex] sqlite in
            ListCursor.Key(sqlite, sortKeyIndex).map {
                ListCursor(fingerprint: fingerprint(request), key: $0, id: String(decoding: RowRenderer.text(sqlite, idIndex), as: UTF8.self)).encoded()
            }
        })
    }

    /// Decodes the request's cursor and checks that it was made by this list: same
    /// table, order and filters, an id, and a key of the kind the order sorts by.
    private func decodeCursor(_ request: ListRequest) throws(StoreError) -> ListCursor? {
        guard let text = request.cursor else { return nil }
        let cursor = try ListCursor(decoding: text, fingerprint: fingerprint(request))
        let keyFits: Bool = switch (request.order, cursor.key) {
        case let (.field(name, _), .integer): sortColumns[name] == "created_at"
        case let (.field(name, _), .text): sortColumns[name] != "created_at"
        case let (.relevance, .real(value)), let (.distance, .real(value)): value.isFinite
        default: false
        }
        guard keyFits, CatalogID(cursor.id) != nil else { throw .invalidCursor("The cursor is malformed.") }
        return cursor
    }

    /// What a cursor of `request` is bound to: this table, the order and the filters.
    private func fingerprint(_ request: ListRequest) -> String {
        "\(table)|\(request.fingerprint)"
    }

    /// The rows of one page (renderer columns first, then `sort_key`) and the next cursor.
    private func listRows(_ request: ListRequest) throws(StoreError) -> ([Row], String?) {
        let (sql, arguments) = try listQuery(request, after: decodeCursor(request))
        let rows = try guarded {
            try database.read { db in try Row.fetchAll(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments)) }
        }
        let page = Array(rows.prefix(request.limit))
        var next: String?
        if rows.count > request.limit, let last = page.last, let key = ListCursor.Key(last["sort_key"] as DatabaseValue) {
            next = ListCursor(fingerprint: fingerprint(request), key: key, id: last["id"]).encoded()
        }
        return (page, next)
    }

    /// Builds `SELECT * FROM (rows with their sort_key) WHERE keyset ORDER BY sort_key, id LIMIT n+1`.
    /// Plain lists seek straight to the cursor on the (column, id) index, so a page costs
    /// the same at any depth; filtered lists sort only their matches.
    private func listQuery(_ request: ListRequest, after cursor: ListCursor?) throws(StoreError) -> (String, [(any DatabaseValueConvertible)?]) {
        var from = "\(table) t"
        var filters: [String] = []
        var outerFilters: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        var keyExpression: String
        var descending = false
        var keyArguments: [(any DatabaseValueConvertible)?] = []

        let match = request.search.flatMap(SearchQuery.fts5)
        switch request.order {
        case let .field(name, isDescending):
            guard let column = sortColumns[name] else { throw .invalidCursor("Cannot sort by \(name).") }
            keyExpression = "t.\(column)"
            descending = isDescending
        case .relevance:
            guard let search, request.search != nil else { throw .invalidCursor("Relevance order needs a search.") }
            // Text without a letter or digit searches for nothing: no rank to compute.
            keyExpression = match == nil ? "0.0" : "bm25(\(search.table), \(search.weights))"
        case .distance:
            guard let (latitude, longitude, _) = request.near else { throw .invalidCursor("Distance order needs a point.") }
            keyExpression = Geo.distanceSQL
            keyArguments = [latitude, latitude, longitude]
        }

        if request.search != nil, match == nil {
            filters.append("0")
        } else if let search, let match {
            if case .relevance = request.order {
                from = "\(search.table) JOIN \(table) t ON t.pk = \(search.table).rowid"
                filters.append("\(search.table) MATCH ?")
            } else {
                filters.append("t.pk IN (SELECT rowid FROM \(search.table) WHERE \(search.table) MATCH ?)")
            }
            arguments.append(match)
        }
        if let scope = request.scope {
            guard let filter = scopeFilter(scope) else { throw .invalidCursor("This list cannot be scoped that way.") }
            filters.append(filter)
            arguments.append(Self.scopeID(scope).rawValue)
        }
        for area in request.areas {
            let (filter, filterArguments) = Geo.filter(area)
            filters.append(filter)
            arguments += filterArguments
        }
        var outerArguments: [(any DatabaseValueConvertible)?] = []
        if let (_, _, radius) = request.near {
            outerFilters.append("sort_key <= ?")
            outerArguments.append(radius)
        }
        if let cursor {
            outerFilters.append("(sort_key, id) \(descending ? "<" : ">") (?, ?)")
            outerArguments += [cursor.key.databaseValue, cursor.id]
        }
        let direction = descending ? "DESC" : "ASC"
        let columns = request.order == .distance ? listColumns.distance : listColumns.plain
        var sql = "SELECT \(columns), t.sort_key FROM (SELECT t.*, \(keyExpression) AS sort_key FROM \(from)"
        if !filters.isEmpty { sql += " WHERE " + filters.joined(separator: " AND ") }
        sql += ") t"
        if !outerFilters.isEmpty { sql += " WHERE " + outerFilters.joined(separator: " AND ") }
        sql += " ORDER BY sort_key \(direction), id \(direction) LIMIT ?"
        return (sql, keyArguments + arguments + outerArguments + [request.limit + 1])
    }

    // MARK: Writes (durable when the completion runs)

    /// Creates a resource from `input`.
    public func create(_ input: Input, completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        let id = CatalogID()
        submit(completion) { [self] db in
            let now = Timestamp.milliseconds(Date())
            return try renderWritten(db, insertSQL, StatementArguments([id.rawValue] + values(input) + [now, now, 1]))
        }
    }

    /// Replaces the resource `id` with `input`, if `preconditions` hold.
    public func replace(_ id: CatalogID, with input: Input, preconditions: WritePreconditions,
                        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        update(id, preconditions: preconditions, completion: completion) { _ in input }
    }

    /// Changes the resource `id` to what `transform` makes of its current value, inside
    /// the write transaction (so concurrent changes cannot interleave). An error thrown
    /// by `transform` fails the call with that same error.
    public func update(_ id: CatalogID, preconditions: WritePreconditions, completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void,
                       transform: @escaping @Sendable (Model) throws -> Input) {
        submit(completion) { [self] db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: selectSQL), arguments: [id.rawValue]) else {
                throw StoreError.notFound
            }
            // The content is checked first (422 before 412), as for PUT, whose body is
            // validated before it reaches the store.
            let input = try transform(decode(row))
            try preconditions.check(current: row["version"])
            return try renderWritten(db, updateSQL, StatementArguments(values(input) + [Timestamp.milliseconds(Date()), id.rawValue]))
        }
    }

    /// Deletes the resource `id`, if `preconditions` hold.
    public func delete(_ id: CatalogID, preconditions: WritePreconditions, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        submit(atomic: deletionWritesMore, { [cache] result in
            if case .success = result { cache?.invalidate(id: id.rawValue) }
            completion(result)
        }) { [self] db in
            let current = try Int.fetchOne(db.cachedStatement(sql: "SELECT version FROM \(table) WHERE id = ?"), arguments: [id.rawValue])
            try preconditions.check(current: current)
            try willDelete(db, id)
            try db.cachedStatement(sql: "DELETE FROM \(table) WHERE id = ?").execute(arguments: [id.rawValue])
        }
    }

    /// The id a scope lists within.
    private static func scopeID(_ scope: ListRequest.Scope) -> CatalogID {
        switch scope {
        case let .commentsOn(item), let .playlistsContaining(item): item
        case let .repliesTo(comment): comment
        }
    }

    /// How many resources exist.
    public func count() throws(StoreError) -> Int {
        try guarded { try database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0 } }
    }

    /// Runs an INSERT or UPDATE … RETURNING and renders the row it returns.
    func renderWritten(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws -> RenderedResource {
        let statement = try db.cachedStatement(sql: sql)
        // GRDB steps the write (keeping its own bookkeeping); the cursor must outlive the
        // column reads, since releasing it resets the statement.
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        return try withExtendedLifetime(rows) {
            guard try rows.next() != nil else { throw StoreError.notFound }
            var writer = JSONWriter()
            try renderer.render(statement.sqliteStatement, into: &writer)
            guard let id = CatalogID(String(decoding: RowRenderer.text(statement.sqliteStatement, idIndex), as: UTF8.self)) else {
                throw StoreError.unavailable("The database holds a malformed id.")
            }
            return RenderedResource(id: id, version: Int(sqlite3_column_int64(statement.sqliteStatement, versionIndex)), json: writer.bytes)
        }
    }

    /// Submits a write. Database errors reach `completion` as ``StoreError``; errors
    /// thrown by the caller's own code (a transform) pass through unchanged.
    func submit<T: Sendable>(atomic: Bool = false, _ completion: @escaping @Sendable (Result<T, any Error>) -> Void,
                             _ work: @escaping (Database) throws -> T) {
        database.writes.submit(atomic: atomic, work) { result in
            completion(result.mapError { $0 is DatabaseError ? StoreError.from($0) : $0 })
        }
    }
}

extension StoreError {
    /// Maps storage-engine errors to store errors; store errors pass through.
    static func from(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_CONSTRAINT: return .conflict("The change conflicts with existing data.")
            case .SQLITE_BUSY, .SQLITE_LOCKED: return .unavailable("The database is busy; retry shortly.")
            case .SQLITE_FULL: return .unavailable("The database is full.")
            default: return .unavailable("The database failed to complete the request.")
            }
        }
        return .unavailable("The request could not be completed.")
    }
}

/// Runs `body`, mapping any error to ``StoreError``.
func guarded<T>(_ body: () throws -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch {
        throw StoreError.from(error)
    }
}
