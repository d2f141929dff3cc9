import CatalogModels
import CatalogSchema
import Foundation

/// Writes, durable when their completion runs: create, replace, delete.
extension ResourceStore {
    /// Creates a resource from `values`, read by the declaration's ``ResourceSchema/creation``
    /// reader, owned by `owner` when the resource has owners.
    package func create(
        _ values: FieldValues, owner: CatalogID? = nil, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        // The id is drawn here, on the caller's thread: the writer's time goes to the database.
        let id = CatalogID()
        submit(options, completion) { [self] db in try insert(db, values, owner: owner, at: Timestamp.milliseconds(Date()), id: id) }
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
        let countArguments: SQLArguments = schema.counted ? SchemaField.counts.map { _ in 0 } : []
        let inserted = [id.rawValue] + arguments(values, creationMembers) + [time, time, 1] + ownerArgument + countArguments
        guard let boundInsert else { return try renderWritten(db, insertSQL, inserted) }
        // Nothing of the insert is read back: a writer's batch sends the next write on without waiting.
        try db.insertDeferred(boundInsert.insert, inserted)
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
    public func create(_ input: some Encodable, options: WriteOptions = WriteOptions(), completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        guard let values = readValues(input, schema.creation, failing: completion) else { return }
        create(values, options: options, completion: completion)
    }

    /// Replaces the resource `id` with `values` (read by ``ResourceSchema/edit``), if `preconditions` hold.
    package func replace(
        _ id: CatalogID, with values: FieldValues, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        update(id, preconditions: preconditions, options: options, completion: completion) { _ in values }
    }

    /// Replaces the resource `id` with `input`, checked as a body, if `preconditions` hold.
    public func replace(
        _ id: CatalogID, with input: some Encodable, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        guard let values = readValues(input, schema.edit, failing: completion) else { return }
        replace(id, with: values, preconditions: preconditions, options: options, completion: completion)
    }

    /// Changes the resource `id` to what `transform` makes of its current editable
    /// document (its writable fields), inside the write transaction, so concurrent
    /// changes cannot interleave. An error thrown by `transform` fails the call with that
    /// same error. A frozen resource (a comment tombstone) is a `conflict`.
    package func update(
        _ id: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void,
        transform: @escaping @Sendable ([String: JSONValue]) throws -> FieldValues
    ) {
        submit(options, atomic: relations.didUpdate != nil, completion) { [self] db in
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
    public func delete(
        _ id: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        submit(
            options, atomic: relations.willDelete != nil,
            { [cache] result in
                if case .success = result { cache?.invalidate(id: id.rawValue) }
                completion(result)
            }
        ) { [self] db in
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
    func submit<T: Sendable>(
        _ options: WriteOptions, atomic: Bool = false, _ completion: @escaping @Sendable (Result<T, any Error>) -> Void,
        _ work: @escaping (any SQLConnection) throws -> T
    ) {
        database.submit(options, atomic: atomic, work) { result in
            completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 })
        }
    }
}
