import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// The REST endpoints every resource has, following the API conventions and derived from
/// its declaration: list, get, create, replace, merge-patch and delete, with ETags and
/// conditional requests.
///
/// Reads run inline on the event loop (a single indexed SQLite statement, rendered
/// straight from the row to JSON), or are sent from it (PostgreSQL); writes go through
/// the store's group-committing writer and answer once durable.
struct ResourceEndpoints: Sendable {
    let store: ResourceStore
    let metrics: Metrics
    let options: ListOptions
    /// The fields `fields=…` may name.
    let fields: FieldSet
    /// What `include=…` may embed in a single resource, by name.
    let includes: [String: Embedding]
    /// The fields a caller may see of the resource with an id, when not all (a user's
    /// email is for the user and admins).
    var visibleFields: (@Sendable (Caller, CatalogID) -> FieldMask)?

    /// The collection path, such as `/v1/games`.
    var path: String { store.schema.path }
    private var schema: ResourceSchema { store.schema }

    /// Endpoints over `store`, with the sorts, search, geographic filters, list filters
    /// and includes its declaration offers; `catalog` provides what includes embed.
    init(_ store: ResourceStore, catalog: CatalogStore, metrics: Metrics, descendingByDefault: Bool = false) {
        self.metrics = metrics
        self.store = store
        fields = FieldSet(store)
        let schema = store.schema
        options = ListOptions(
            sortFields: schema.sortableFields, descendingByDefault: descendingByDefault, searchable: schema.searchTable != nil,
            geographic: schema.geographic, fields: fields, filters: schema.filters)
        includes = Dictionary(uniqueKeysWithValues: schema.includes.map { name in (name, catalog.embedding(name, in: schema)) })
    }

    /// Who may write: for resources users own, any signed-in caller (the owner, editors
    /// and admins, as each write checks); else editors.
    var writers: Access { schema.ownership == nil ? .editor : .member }

    /// How reads of this resource may be cached: per caller when some callers see more
    /// (hidden resources, or embedded ones that can be hidden: any `include`).
    var readCaching: Caching {
        if schema.ownership?.hiddenWhen != nil { return .perCaller }
        return includes.isEmpty ? .shared : .perCallerWhen(Caching.includes)
    }

    /// Registers the collection (list, create) and the resource (get, replace, patch,
    /// delete); anyone reads.
    func register(in routes: inout Routes) {
        let item = path + "/{id}"
        routes.add(.GET, path, .read, caching: schema.ownership?.hiddenWhen != nil ? .perCaller : .shared, list())
        routes.add(.POST, path, writers, write(create))
        routes.add(.GET, item, .read, caching: readCaching, get)
        routes.add(.PUT, item, writers, write(replace))
        routes.add(.PATCH, item, writers, write(patch))
        routes.add(.DELETE, item, writers, write(delete))
    }

    // MARK: Reads

    /// Lists the resources, within the scope `scope` makes of the request when given
    /// (its path names the parent); `descending` overrides the default order's direction.
    func list(scope: (@Sendable (HTTPRequest, Caller) throws(APIError) -> ListRequest.Scope?)? = nil, descending: Bool? = nil) -> Endpoint {
        var options = options
        if let descending { options.descendingByDefault = descending }
        // A list within a parent reads the parent too: only a list without one is sent from the loop.
        let onLoop = scope == nil ? listOnLoop(options) : nil
        let body: @Sendable (HTTPRequest, Caller) throws -> HTTPResponse = { [self, options] request, caller in
            let query = try Self.listRequest(request, caller, options, scope: scope?(request, caller))
            let started = Self.now()
            let page = try store.renderedList(query)
            metrics.observeRead(seconds: Self.now() - started)
            return Self.page(page, request: request)
        }
        return .read(isExpensive: ListParameters.isExpensive, body, onLoop: onLoop)
    }

    /// The list `request` asks `caller`'s view of, within `scope`.
    private static func listRequest(_ request: HTTPRequest, _ caller: Caller, _ options: ListOptions, scope: ListRequest.Scope? = nil) throws -> ListRequest {
        var query = try ListParameters.parse(request, options: options, scope: scope)
        query.viewer = caller.viewer
        return query
    }

    /// Sends a page of a list without a parent from the event loop (``LoopStart``): a
    /// search's or a geographic list's as its caller's heavy read (``RateLimiter/partition(_:_:)``).
    private func listOnLoop(_ options: ListOptions) -> LoopStart {
        { [self] request, caller, reactor, isAbandoned, elsewhere, done in
            let query = try Self.listRequest(request, caller, options)
            let started = Self.now()
            return try store.renderedListOnLoop(query, caller: RateLimiter.partition(caller, request), reactor: reactor, isAbandoned: isAbandoned) {
                outcome in
                guard case let .done(result) = outcome else { return elsewhere() }
                metrics.observeRead(seconds: Self.now() - started)
                done(result.map { page in Self.page(page, request: request) }.mapError { error -> any Error in error })
            }
        }
    }

    /// A rendered page, with `Link: <…>; rel="next"` when there is a next page, and its
    /// weak tag when its digest is known already (else ``Caching`` makes it).
    static func page(_ page: (json: [UInt8], nextCursor: String?, digest: UInt64?), request: HTTPRequest) -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("Content-Type", JSONResponse.contentType)]
        if let digest = page.digest { headers.append(("ETag", Caching.listTag(digest: digest))) }
        if let cursor = page.nextCursor {
            headers.append(ListParameters.nextLink(request, cursor: cursor))
        }
        return HTTPResponse(status: .ok, headers: headers, body: page.json)
    }

    /// `GET …/{id}`, with `fields` and `include`: sent from the event loop where reads wait
    /// on a network and it embeds nothing.
    var get: Endpoint {
        .read(isExpensive: { _ in false }) { [self] request, caller in
            try show(Self.id(request), request, caller)
        } onLoop: { [self] request, caller, reactor, isAbandoned, elsewhere, done in
            let id = try Self.id(request)
            let shape = try shape(id, request, caller)
            guard shape.embedding.isEmpty else { return false }
            let started = Self.now()
            return store.renderedOnLoop(id, fields: shape.fields, viewer: caller.viewer, reactor: reactor, isAbandoned: isAbandoned) { outcome in
                guard case let .done(result) = outcome else { return elsewhere() }
                metrics.observeRead(seconds: Self.now() - started)
                done(Result { try respond(result.get(), shape) })
            }
        }
    }

    /// The resource `id` as `caller` may see it, with the request's `fields` and `include`.
    func show(_ id: CatalogID, _ request: HTTPRequest, _ caller: Caller) throws -> HTTPResponse {
        let shape = try shape(id, request, caller)
        let started = Self.now()
        let found = try store.rendered(id, fields: shape.fields, embedding: shape.embedding, viewer: caller.viewer, reader: caller.userID)
        metrics.observeRead(seconds: Self.now() - started)
        return try respond(found, shape)
    }

    /// What `caller` may see of the resource `id`, of what the request asks (`fields`, `include`).
    private func shape(_ id: CatalogID, _ request: HTTPRequest, _ caller: Caller) throws -> Representation {
        var shape = try Representation.parse(request, fields: fields, includes: includes)
        // The reader's own state is for a signed-in reader.
        if shape.embedding.contains(where: \.isReaders), caller.userID == nil { throw APIError.unauthenticated }
        if let visible = visibleFields?(caller, id), visible != .all {
            shape.fields = shape.fields.intersection(visible)
            shape.isShaped = true
        }
        return shape
    }

    /// The answer with `found` in `shape`: 404 when it is absent.
    private func respond(_ found: RenderedResource?, _ shape: Representation) throws -> HTTPResponse {
        guard let resource = found else { throw APIError.notFound }
        return Self.response(resource, tag: shape.isShaped ? ETag.header(resource.version, body: resource.json) : Self.tag(resource, in: schema))
    }

    // MARK: Writes

    private func create(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let values = try RequestBody.values(request, schema.creation, mediaType: RequestBody.json)
        store.create(values, owner: caller.userID, options: options) { result in done(result.map { resource in Self.created(resource, in: store.schema) }) }
    }

    /// Checks that `caller` may change the resource `id`, for resources users own: 404
    /// when it does not exist or is hidden from the caller, 403 when the caller may see
    /// it but is neither its owner, an editor nor an admin.
    func checkMayChange(_ id: CatalogID, _ caller: Caller) throws {
        guard schema.ownership != nil, !caller.has(.editor) else { return }
        guard let ownership = try store.ownership(of: id) else { throw APIError.notFound }
        try caller.checkMayChange(owner: ownership.owner, hidden: ownership.hidden)
    }

    /// Checks that `caller` may see the resource `id` (404 otherwise), for resources that can be hidden.
    func checkMaySee(_ id: CatalogID, _ caller: Caller) throws {
        guard schema.ownership?.hiddenWhen != nil, !caller.has(.editor) else { return }
        guard let ownership = try store.ownership(of: id), !ownership.hidden || caller.is(ownership.owner) else { throw APIError.notFound }
    }

    private func replace(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        try checkMayChange(id, caller)
        let preconditions = try ETag.preconditions(request)
        let values = try RequestBody.values(request, schema.edit, mediaType: RequestBody.json)
        store.replace(id, with: values, preconditions: preconditions, options: options) { done(Self.updated($0, in: schema)) }
    }

    /// `PATCH …/{id}` with a merge patch of the editable document.
    func patch(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        try checkMayChange(id, caller)
        try patch(id, request, accepting: schema.edit, options, done)
    }

    /// Applies the request's merge patch to the resource `id`; every member of the patch
    /// must be one `accepting` takes, a `null` too (it vanishes in the merge). The patch's
    /// own values are checked here, on the request's thread, so a bad one never takes
    /// the writer's time; the merged document is checked again on the writer.
    func patch(_ id: CatalogID, _ request: HTTPRequest, accepting: DocumentShape, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let preconditions = try ETag.preconditions(request)
        let patch = try RequestBody.object(request, mediaType: RequestBody.mergePatch)
        var errors = accepting.unacceptedMembers(patch)
        if errors.isEmpty { errors = schema.edit.patchErrors(patch) }
        guard errors.isEmpty else { throw APIError.validation(errors) }
        let shape = schema.edit
        store.update(id, preconditions: preconditions, options: options, completion: { done(Self.updated($0, in: schema)) }) { document in
            guard case let .object(merged) = JSONValue.mergePatch(.object(document), .object(patch)) else { throw APIError.validation([]) }
            return try RequestBody.read(merged, shape)
        }
    }

    /// `DELETE …/{id}`.
    func delete(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        try checkMayChange(id, caller)
        let preconditions = try ETag.preconditions(request)
        store.delete(id, preconditions: preconditions, options: options) { result in
            done(result.map { HTTPResponse(status: .noContent) })
        }
    }

    // MARK: Helpers

    /// Monotonic seconds.
    private static func now() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1_000_000_000
    }

    /// A handler whose work finishes later (a durable write, submitted with the request's
    /// ``WriteOptions``) and answers through `done`; the time from submission to answer is
    /// recorded as a database write.
    func write(_ body: @escaping @Sendable (HTTPRequest, Caller, WriteOptions, @escaping Completion) throws -> Void) -> Endpoint {
        .later { [metrics] request, caller, options, done in
            let started = Self.now()
            try body(request, caller, options) { result in
                // Not for the answer made inside the write's transaction to keep it: only once durable.
                if options.inTransaction?.capture == nil { metrics.observeWrite(seconds: Self.now() - started) }
                done(result)
            }
        }
    }

    /// The answer to an edit of a resource of `schema`.
    static func updated(_ result: Result<RenderedResource, any Error>, in schema: ResourceSchema) -> Result<HTTPResponse, any Error> {
        result.map { response($0, tag: tag($0, in: schema)) }
    }

    /// A 201 for the new `resource` of `schema`, with its `Location`.
    static func created(_ resource: RenderedResource, in schema: ResourceSchema) -> HTTPResponse {
        response(resource, status: .created, tag: tag(resource, in: schema), headers: [("Location", "\(schema.path)/\(resource.id)")])
    }

    /// The tag of a whole `resource` of `schema`: its version's, or, for a counted resource
    /// (whose counts change without a new version), the version and a digest of the body.
    static func tag(_ resource: RenderedResource, in schema: ResourceSchema) -> String {
        schema.counted ? ETag.header(resource.version, body: resource.json) : ETag.header(resource.version)
    }

    /// A rendered resource with its `ETag` (`tag`, or its version's).
    static func response(
        _ resource: RenderedResource, status: HTTPStatus = .ok, tag: String? = nil,
        headers: [(name: String, value: String)] = []
    ) -> HTTPResponse {
        var fields: [(name: String, value: String)] = [("Content-Type", JSONResponse.contentType), ("ETag", tag ?? ETag.header(resource.version))]
        if !headers.isEmpty { fields += headers }  // (`+` would allocate again for none)
        return HTTPResponse(status: status, headers: fields, body: resource.json)
    }

    /// The id in the path parameter `name`; 400 when it is not a UUID.
    static func id(_ request: HTTPRequest, _ name: String = "id") throws(APIError) -> CatalogID {
        let text = request.pathParameters[name] ?? ""
        guard let id = CatalogID(text) else { throw .invalidID(text) }
        return id
    }
}
