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
/// straight from the row to JSON); writes go through the store's group-committing
/// writer and answer once durable.
struct ResourceEndpoints<Model: Codable & Sendable & Hashable, Input: Encodable & Sendable>: Sendable {
    let store: ResourceStore<Model, Input>
    let metrics: Metrics
    let options: ListOptions
    /// The fields `fields=…` may name.
    let fields: FieldSet
    /// What `include=…` may embed in a single resource, by name.
    let includes: [String: Embedding]

    /// The collection path, such as `/v1/games`.
    var path: String { store.schema.path }
    private var schema: ResourceSchema { store.schema }

    /// Endpoints over `store`, with the sorts, search, geographic filters, list filters
    /// and includes its declaration offers; `catalog` provides what includes embed.
    init(_ store: ResourceStore<Model, Input>, catalog: CatalogStore, metrics: Metrics, descendingByDefault: Bool = false) {
        self.metrics = metrics
        self.store = store
        fields = FieldSet(store)
        let schema = store.schema
        options = ListOptions(sortFields: schema.sortableFields, descendingByDefault: descendingByDefault, searchable: schema.searchTable != nil,
                              geographic: schema.geographic, fields: fields, filters: schema.filters)
        includes = Dictionary(uniqueKeysWithValues: schema.includes.compactMap { name in catalog.embedding(name, in: schema).map { (name, $0) } })
    }

    /// Registers the collection (list, create) and the resource (get, replace, patch, delete).
    func register(in router: inout Router) {
        let item = path + "/{id}"
        router.add(.GET, path, list())
        router.add(.POST, path, write(create))
        router.add(.GET, item, get)
        router.add(.PUT, item, write(replace))
        router.add(.PATCH, item, write(patch))
        router.add(.DELETE, item, write(delete))
    }

    // MARK: Reads

    /// Lists the resources, within the scope `scope` makes of the request when given
    /// (its path names the parent); `descending` overrides the default order's direction.
    func list(scope: (@Sendable (HTTPRequest) throws(APIError) -> ListRequest.Scope)? = nil, descending: Bool? = nil) -> Handler {
        var options = options
        if let descending { options.descendingByDefault = descending }
        return .inline { [self, options] request in
            let query = try ListParameters.parse(request, options: options, scope: scope?(request))
            let started = Self.now()
            let page = try store.renderedList(query)
            metrics.observeRead(seconds: Self.now() - started)
            return Self.page(page, request: request)
        }
    }

    /// A rendered page, with `Link: <…>; rel="next"` when there is a next page.
    static func page(_ page: (json: [UInt8], nextCursor: String?), request: HTTPRequest) -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("Content-Type", JSONResponse.contentType)]
        if let cursor = page.nextCursor {
            headers.append(("Link", "<\(request.path)?\(ListParameters.nextQuery(request, cursor: cursor))>; rel=\"next\""))
        }
        return HTTPResponse(status: .ok, headers: headers, body: page.json)
    }

    /// `GET …/{id}`, with `fields` and `include`.
    var get: Handler {
        .inline { [self] request in
            let id = try Self.id(request)
            let shape = try Representation.parse(request, fields: fields, includes: includes)
            let started = Self.now()
            let found = try store.rendered(id, fields: shape.fields, embedding: shape.embedding)
            metrics.observeRead(seconds: Self.now() - started)
            guard let resource = found else { throw APIError.notFound }
            let tag = shape.isShaped ? ETag.header(resource.version, body: resource.json) : ETag.header(resource.version)
            return try Self.conditional(request, tag: tag) ?? Self.response(resource, tag: tag)
        }
    }

    /// 304 when the request's `If-None-Match` lists `tag`.
    static func conditional(_ request: HTTPRequest, tag: String) throws(APIError) -> HTTPResponse? {
        guard try ETag.noneMatch(request, tag: tag) else { return nil }
        return HTTPResponse(status: .notModified, headers: [("ETag", tag)])
    }

    // MARK: Writes

    private func create(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let values = try RequestBody.values(request, schema.creation, mediaType: RequestBody.json)
        store.create(values) { result in done(result.map { resource in Self.created(resource, in: store.schema) }) }
    }

    private func replace(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        let values = try RequestBody.values(request, schema.edit, mediaType: RequestBody.json)
        store.replace(id, with: values, preconditions: preconditions) { done(Self.updated($0)) }
    }

    /// `PATCH …/{id}` with a merge patch of the editable document.
    func patch(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        let patch = try RequestBody.object(request, mediaType: RequestBody.mergePatch)
        // Every member of the patch must be writable, a `null` too (it vanishes in the merge).
        let unaccepted = schema.edit.unacceptedMembers(patch)
        guard unaccepted.isEmpty else { throw APIError.validation(unaccepted) }
        let shape = schema.edit
        store.update(id, preconditions: preconditions, completion: { done(Self.updated($0)) }) { document in
            guard case let .object(merged) = JSONValue.mergePatch(.object(document), .object(patch)) else { throw APIError.validation([]) }
            return try RequestBody.read(merged, shape)
        }
    }

    /// `DELETE …/{id}`.
    func delete(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        store.delete(id, preconditions: preconditions) { result in
            done(result.map { HTTPResponse(status: .noContent) })
        }
    }

    // MARK: Helpers

    /// Monotonic seconds.
    private static func now() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1_000_000_000
    }

    /// A handler whose work finishes later (a durable write) and answers through `done`;
    /// the time from submission to answer is recorded as a database write.
    func write(_ body: @escaping @Sendable (HTTPRequest, @escaping Completion) throws -> Void) -> Handler {
        .later { [metrics] request, done in
            let started = Self.now()
            try body(request) { result in
                metrics.observeWrite(seconds: Self.now() - started)
                done(result)
            }
        }
    }

    static func updated(_ result: Result<RenderedResource, any Error>) -> Result<HTTPResponse, any Error> {
        result.map { response($0) }
    }

    /// A 201 for the new `resource` of `schema`, with its `Location`.
    static func created(_ resource: RenderedResource, in schema: ResourceSchema) -> HTTPResponse {
        response(resource, status: .created, headers: [("Location", "\(schema.path)/\(resource.id)")])
    }

    /// A rendered resource with its `ETag` (`tag`, or its version's).
    static func response(_ resource: RenderedResource, status: HTTPStatus = .ok, tag: String? = nil,
                         headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", JSONResponse.contentType), ("ETag", tag ?? ETag.header(resource.version))] + headers,
                     body: resource.json)
    }

    /// The id in the path parameter `name`; 400 when it is not a UUID.
    static func id(_ request: HTTPRequest, _ name: String = "id") throws(APIError) -> CatalogID {
        let text = request.pathParameters[name] ?? ""
        guard let id = CatalogID(text) else { throw .invalidID(text) }
        return id
    }
}
