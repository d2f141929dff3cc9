import CatalogModels

/// How a resource's rows become JSON: its renderer, its render cache, and where its id
/// and version are. Not generic over the resource's model, so that its entry points,
/// which receive rows from a connection lent as `any SQLConnection`, dispatch once to
/// their SQLite specializations: SQLite's per-column reads are then direct calls (the
/// PostgreSQL path stays generic).
struct ResourceRendering: Sendable {
    let renderer: RowRenderer
    /// Renderings of whole rows by id and version, for resources that cache them.
    let cache: RenderCache?
    let idIndex: Int32
    private let versionIndex: Int32

    init(renderer: RowRenderer, cache: RenderCache?) {
        self.renderer = renderer
        self.cache = cache
        idIndex = renderer.index(of: "id")
        versionIndex = renderer.index(of: "version")
    }

    /// The first row as the resource `id`, showing `fields` and the `embedded` members; `nil` without a row.
    @_specialize(exported:false,kind:full,where Rows == SQLiteRows)
    func one<Rows: SQLRows>(_ rows: Rows, id: CatalogID, fields: FieldMask, embedded: [EmbeddedMember]) throws -> RenderedResource? {
        guard try rows.step() else { return nil }
        var writer = JSONWriter(capacity: embedded.isEmpty ? 512 : 16_384)
        try renderer.render(rows, into: &writer, mask: fields, embedded: embedded)
        return RenderedResource(id: id, version: Int(rows.integer(versionIndex)), json: writer.bytes)
    }

    /// The first row as the whole resource `id`, through `cache` (the render cache),
    /// recorded there as current in database `generation` (the read began in it; none
    /// where the engine has no generations) and kept as read in `epoch`; `nil` without a row.
    @_specialize(exported:false,kind:full,where Rows == SQLiteRows)
    func one<Rows: SQLRows>(_ rows: Rows, id: CatalogID, cache: RenderCache, confirming generation: UInt64?, epoch: UInt64) throws -> RenderedResource? {
        guard try rows.step() else { return nil }
        var writer = JSONWriter(capacity: 512)
        try renderer.render(rows, into: &writer, cache: cache, epoch: epoch, confirming: generation)
        return RenderedResource(id: id, version: Int(rows.integer(versionIndex)), json: writer.bytes)
    }

    /// The whole resource `id` from the render cache, when a read in database `generation`
    /// found it current (``RenderCache/current(id:generation:)``).
    func current(_ id: CatalogID, generation: UInt64) -> RenderedResource? {
        guard let cache else { return nil }
        var raw = id.rawValue
        guard let (version, json) = raw.withUTF8({ cache.current(id: $0, generation: generation) }) else { return nil }
        return RenderedResource(id: id, version: Int(version), json: json)
    }

    /// Writes a page of `request` from rows that carry their sort key after the
    /// renderer's columns; returns the next page's cursor, bound to `fingerprint` (made only when there is one).
    /// When the page is written from the render cache, `kept` (when given) receives its
    /// items' keys (and is marked incomplete when the cache could not keep one of them).
    @_specialize(exported:false,kind:full,where Rows == SQLiteRows)
    func page<Rows: SQLRows>(
        _ rows: Rows, _ request: ListRequest, fingerprint: () -> String, epoch: UInt64, maxBytes: Int,
        into writer: inout JSONWriter, kept: inout PageCache.Page?
    ) throws -> String? {
        let sortKeyIndex = renderer.columnCount
        let cached = request.fields == .all ? cache : nil
        if cached == nil { kept = nil }
        return try rows.writePage(
            limit: request.limit, maxBytes: maxBytes, into: &writer,
            item: { [renderer] rows, writer in
                if let cached {
                    let held = try renderer.render(rows, into: &writer, cache: cached, epoch: epoch)
                    if kept != nil {
                        let key = renderer.cacheKey(rows)
                        kept?.append(id: key.id, version: key.version, revision: key.revision, held: held)
                    }
                } else {
                    try renderer.render(rows, into: &writer, mask: request.fields)
                }
            },
            cursor: { [idIndex] rows in
                ListCursor.Key(rows.value(sortKeyIndex)).map {
                    ListCursor(fingerprint: fingerprint(), key: $0, id: String(decoding: rows.text(idIndex), as: UTF8.self)).encoded()
                }
            })
    }

    /// A kept page (``PageCache``) written again from the render cache; `nil` when the
    /// cache no longer holds one of its items at its version.
    func write(_ page: PageCache.Page) -> [UInt8]? {
        guard let cache else { return nil }
        var writer = JSONWriter(capacity: 256 + page.items.count * 12)
        writer.openPage()
        var first = true
        let found = page.forEachItem { id, version, revision in
            if !first { writer.byte(UInt8(ascii: ",")) }
            first = false
            return cache.write(id: id, version: version, revision: revision, into: &writer)
        }
        guard found else { return nil }
        writer.closePage(next: page.nextCursor)
        return writer.bytes
    }

    /// Every row, by the id it holds (those whose id is malformed are left out).
    @_specialize(exported:false,kind:full,where Rows == SQLiteRows)
    func all<Rows: SQLRows>(_ rows: Rows) throws -> [CatalogID: RenderedResource] {
        var rendered: [CatalogID: RenderedResource] = [:]
        while try rows.step() {
            guard let id = CatalogID(String(decoding: rows.text(idIndex), as: UTF8.self)) else { continue }
            var writer = JSONWriter(capacity: 512)
            try renderer.render(rows, into: &writer)
            rendered[id] = RenderedResource(id: id, version: Int(rows.integer(versionIndex)), json: writer.bytes)
        }
        return rendered
    }

    /// The row an INSERT or UPDATE … RETURNING wrote, or an INSERT bound (``BoundRow``).
    @_specialize(exported:false,kind:full,where Rows == SQLiteRows)
    @_specialize(exported:false,kind:full,where Rows == BoundRow)
    func written<Rows: SQLRows>(_ rows: Rows) throws -> RenderedResource {
        guard try rows.step() else { throw StoreError.notFound }
        var writer = JSONWriter()
        try renderer.render(rows, into: &writer)
        guard let id = CatalogID(String(decoding: rows.text(idIndex), as: UTF8.self)) else {
            throw StoreError.unavailable("The database holds a malformed id.")
        }
        return RenderedResource(id: id, version: Int(rows.integer(versionIndex)), json: writer.bytes)
    }
}
