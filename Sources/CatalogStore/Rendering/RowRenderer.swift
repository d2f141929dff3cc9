import CatalogModels
import CatalogSchema

/// One member of a resource's JSON object and the column it comes from.
struct RenderedField: Sendable {
    enum Kind: Sendable {
        /// A string; NULL (for optional fields) is omitted, as for every kind.
        case text
        case real
        case integer
        /// An integer column holding 0 or 1, written as `false` or `true`.
        case boolean
        /// Milliseconds since 1970, written as an RFC 3339 string.
        case timestamp
        /// A JSON document the server wrote (an image's object), written as it is.
        case json
        /// Another resource's object, rendered by its renderer from its own columns
        /// (selected where this field's column would be).
        indirect case object(RowRenderer)
    }

    /// The API name (the JSON key).
    let name: String
    /// The JSON key, quoted, with its colon (`"key":`).
    let key: [UInt8]
    let column: String
    let kind: Kind

    init(_ name: String, _ column: String, _ kind: Kind) {
        self.name = name
        self.key = Self.key(name)
        self.column = column
        self.kind = kind
    }

    /// `"name":` as bytes.
    static func key(_ name: String) -> [UInt8] { Array("\"\(name)\":".utf8) }

    /// The rendering of a declared field, or `nil` when documents do not show it (a
    /// member of bodies or import records only).
    init?(_ field: SchemaField) {
        let kind: Kind
        switch field.kind {
        case .text, .url, .id: kind = .text
        case .number: kind = .real
        case .integer: kind = .integer
        case .boolean: kind = .boolean
        case .timestamp: kind = .timestamp
        case .image, .video: kind = .json
        case let .resource(schema): kind = .object(RowRenderer(schema.members))
        case .ids, .documents: return nil
        }
        let column: String
        switch (field.storage, kind) {
        case let (.column(name), _), let (.derived(name), _): column = name
        case (.none, .object): column = ""
        case (.none, _): return nil
        }
        self.init(field.name, column, kind)
    }
}

/// A member rendered by another query (an embedded page), written into an object at
/// its sorted place.
struct EmbeddedMember {
    /// The JSON key, quoted, with its colon.
    let key: [UInt8]
    /// Writes the member's JSON value.
    let write: (inout JSONWriter) throws -> Void
}

/// Which fields of a resource a response shows: a bit per field of the renderer
/// (`id` always). `all` shows every field.
public struct FieldMask: Sendable, Hashable {
    let bits: UInt64

    /// Every field.
    public static let all = FieldMask(bits: .max)

    /// The fields both masks show.
    public func intersection(_ other: FieldMask) -> FieldMask { FieldMask(bits: bits & other.bits) }
}

/// Renders result rows straight from the statement (``SQLRows``) to JSON, without a `Row`,
/// a model or a `String` per field: the fields in sorted key order (as the wire
/// encoder sorts them), absent optionals omitted, timestamps as RFC 3339
/// milliseconds. `RenderingParityTests` check the output equals the Codable models'.
struct RowRenderer: Sendable {
    /// Fields sorted by key.
    let fields: [RenderedField]

    /// What ``render`` reads per field, free of references (so the loop retains nothing):
    /// the key's place in ``keyBytes``, the kind and the first column.
    private struct Slot {
        enum Kind {
            case text, real, integer, boolean, timestamp, json
            /// An embedded object, rendered by ``RowRenderer/objectRenderers`` at this index.
            case object(Int)
        }

        let keyStart: Int
        let keyEnd: Int
        let kind: Kind
        /// The field's first column, from the renderer's first.
        let column: Int32
    }

    private let slots: [Slot]
    /// The renderers of embedded objects.
    private let objectRenderers: [RowRenderer]
    /// Every field's quoted key and colon, one after another.
    private let keyBytes: [UInt8]
    /// Where the `id` and `version` columns are (keys of ``RenderCache``).
    private let idColumn: Int32
    private let versionColumn: Int32
    /// The column naming the row's revision (see ``init(_:revision:)``), selected after the fields.
    let revision: String?
    private let revisionColumn: Int32?
    /// How many columns rendering reads.
    let columnCount: Int32

    /// A renderer of `fields`. With `revision`, the column of that name (in every
    /// embedded object too) is selected last and read as part of ``RenderCache``'s key:
    /// on an engine shared by several servers (PostgreSQL's `xmin`), a row written anew
    /// with an id and version some server has cached has another revision, so no server
    /// can serve a stale rendering.
    init(_ fields: [RenderedField], revision: String? = nil) {
        precondition(fields.count <= 64, "A field mask has 64 bits.")
        self.fields = fields.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { field in
            guard let revision, case let .object(renderer) = field.kind else { return field }
            return RenderedField(field.name, field.column, .object(RowRenderer(renderer.fields, revision: revision)))
        }
        var keyBytes: [UInt8] = []
        var slots: [Slot] = []
        var objectRenderers: [RowRenderer] = []
        var column: Int32 = 0
        for field in self.fields {
            let kind: Slot.Kind
            switch field.kind {
            case .text: kind = .text
            case .real: kind = .real
            case .integer: kind = .integer
            case .boolean: kind = .boolean
            case .timestamp: kind = .timestamp
            case .json: kind = .json
            case let .object(renderer):
                kind = .object(objectRenderers.count)
                objectRenderers.append(renderer)
            }
            slots.append(Slot(keyStart: keyBytes.count, keyEnd: keyBytes.count + field.key.count, kind: kind, column: column))
            keyBytes += field.key
            if case let .object(renderer) = field.kind { column += renderer.columnCount } else { column += 1 }
        }
        self.slots = slots
        self.objectRenderers = objectRenderers
        self.keyBytes = keyBytes
        self.revision = revision
        revisionColumn = revision == nil ? nil : column
        columnCount = revision == nil ? column : column + 1
        let sorted = self.fields
        let columns = slots.indices.map { (sorted[$0].column, slots[$0].column) }
        idColumn = columns.first { $0.0 == "id" }?.1 ?? 0
        versionColumn = columns.first { $0.0 == "version" }?.1 ?? 0
    }

    /// The renderer of the declared `members` that documents show.
    init(_ members: [SchemaField], revision: String? = nil) {
        self.init(members.compactMap(RenderedField.init), revision: revision)
    }

    /// The expressions to select, in the order `render` reads them (from column 0):
    /// `own` of each field's column (and of the revision), `nested` of each column of an
    /// embedded object.
    func selectList(own: (RenderedField) -> String, nested: (RenderedField) -> String = { $0.column }) -> [String] {
        fields.flatMap { field -> [String] in
            if case let .object(renderer) = field.kind { return renderer.selectList(own: nested, nested: nested) }
            return [own(field)]
        } + (revision.map { [own(RenderedField("", $0, .integer))] } ?? [])
    }

    /// The index of the column `column` among those selected.
    func index(of column: String) -> Int32 {
        slots.indices.first { fields[$0].column == column }.map { slots[$0].column } ?? 0
    }

    /// The API names of the fields, sorted.
    var fieldNames: [String] { fields.map(\.name) }

    /// The mask showing `names` (and `id`); `nil` when a name is not a field.
    func mask(_ names: Set<String>) -> FieldMask? {
        var bits: UInt64 = 0
        for name in names.union(["id"]) {
            guard let index = fields.firstIndex(where: { $0.name == name }) else { return nil }
            bits |= 1 << UInt64(index)
        }
        return FieldMask(bits: bits)
    }

    /// Appends the JSON object of the statement's current row, reading the fields from
    /// column `offset` on: the fields `mask` shows, and the `embedded` members (sorted
    /// by key) at their places. An embedded object shows the fields `nested.mask` shows,
    /// and comes from `nested.cache` when given (as read in a snapshot of its epoch).
    func render(
        _ rows: some SQLRows, into writer: inout JSONWriter, offset: Int32 = 0, mask: FieldMask = .all,
        embedded: [EmbeddedMember] = [], nested: (mask: FieldMask, cache: RenderCache?, epoch: UInt64) = (.all, nil, 0)
    ) throws {
        writer.byte(UInt8(ascii: "{"))
        var first = true
        var pending = embedded[...]
        try keyBytes.withUnsafeBufferPointer { keys in
            try slots.withUnsafeBufferPointer { slots in
                for index in 0..<slots.count {
                    let slot = slots[index]
                    let key = UnsafeBufferPointer(rebasing: keys[slot.keyStart..<slot.keyEnd])
                    while let member = pending.first, member.key.lexicographicallyPrecedes(key) {
                        try Self.write(member, first: &first, into: &writer)
                        pending = pending.dropFirst()
                    }
                    guard mask.bits & (1 << UInt64(index)) != 0 else { continue }
                    let column = offset + slot.column
                    if case let .object(object) = slot.kind {
                        let renderer = objectRenderers[object]
                        if !first { writer.byte(UInt8(ascii: ",")) }
                        first = false
                        writer.raw(key)
                        if let cache = nested.cache, nested.mask == .all {
                            try renderer.render(rows, into: &writer, offset: column, cache: cache, epoch: nested.epoch)
                        } else {
                            try renderer.render(rows, into: &writer, offset: column, mask: nested.mask)
                        }
                        continue
                    }
                    if rows.isNull(column) { continue }
                    if !first { writer.byte(UInt8(ascii: ",")) }
                    first = false
                    writer.raw(key)
                    switch slot.kind {
                    case .text:
                        writer.string(utf8: rows.text(column))
                    case .real:
                        writer.number(rows.real(column))
                    case .integer:
                        writer.integer(rows.integer(column))
                    case .boolean:
                        if rows.integer(column) == 0 { writer.raw("false") } else { writer.raw("true") }
                    case .timestamp:
                        writer.timestamp(milliseconds: rows.integer(column))
                    case .json:
                        writer.raw(rows.text(column))
                    case .object:
                        break
                    }
                }
            }
        }
        for member in pending { try Self.write(member, first: &first, into: &writer) }
        writer.byte(UInt8(ascii: "}"))
    }

    /// Appends the whole JSON object of the statement's current row (columns from
    /// `offset`), from `cache` when it holds the row's id at the row's version; a miss is
    /// stored, as read in a snapshot of `epoch`. With `generation`, the row is recorded as
    /// the resource's current one in that database generation (the read began in it).
    /// - Returns: whether `cache` holds the row now (false when it could not keep it).
    @discardableResult
    func render(
        _ rows: some SQLRows, into writer: inout JSONWriter, offset: Int32 = 0, cache: RenderCache, epoch: UInt64, confirming generation: UInt64? = nil
    ) throws -> Bool {
        let (id, version, revision) = cacheKey(rows, offset: offset)
        if cache.write(id: id, version: version, revision: revision, into: &writer) {
            if let generation { cache.confirm(id: id, version: version, revision: revision, generation: generation) }
            return true
        }
        let start = writer.count
        try render(rows, into: &writer, offset: offset)
        return writer.withBytes(from: start) { json in
            cache.store(id: id, version: version, revision: revision, json: json, epoch: epoch, confirmed: generation)
        }
    }

    /// The current row's key in a ``RenderCache``: its id's bytes, its version and its
    /// revision (0 where the engine has none).
    func cacheKey(_ rows: some SQLRows, offset: Int32 = 0) -> (id: UnsafeBufferPointer<UInt8>, version: Int64, revision: Int64) {
        (rows.text(offset + idColumn), rows.integer(offset + versionColumn), revisionColumn.map { rows.integer(offset + $0) } ?? 0)
    }

    private static func write(_ member: EmbeddedMember, first: inout Bool, into writer: inout JSONWriter) throws {
        if !first { writer.byte(UInt8(ascii: ",")) }
        first = false
        writer.raw(member.key)
        try member.write(&writer)
    }
}
