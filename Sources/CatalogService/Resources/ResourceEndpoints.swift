import CatalogModels
import CatalogStore
import Foundation
import HTTPServer

/// The REST endpoints every resource has, following the API conventions:
/// list, get, create, replace, merge-patch and delete, with ETags and conditional requests.
///
/// Reads run inline on the event loop (a single indexed SQLite statement, rendered
/// straight from the row to JSON); writes go through the store's group-committing
/// writer and answer once durable.
struct ResourceEndpoints<Model: Sendable, Input: Codable & Sendable>: Sendable {
    /// The collection path, such as `/v1/games`.
    let path: String
    let store: ResourceStore<Model, Input>
    let metrics: Metrics
    let options: ListOptions
    /// Reads and validates a body object into an input.
    let readInput: @Sendable ([String: JSONValue]) throws(APIError) -> Input
    /// The input that would recreate a model (the document a merge patch applies to).
    let inputOf: @Sendable (Model) -> Input

    /// Endpoints at `path` over `store`, whose sorts and search lists offer; `geographic`
    /// adds `near`/`radius` and `bbox`.
    init(metrics: Metrics, path: String, store: ResourceStore<Model, Input>, geographic: Bool = false,
         readInput: @escaping @Sendable ([String: JSONValue]) throws(APIError) -> Input, inputOf: @escaping @Sendable (Model) -> Input) {
        self.metrics = metrics
        self.path = path
        self.store = store
        let sorts = store.sortableFields
        options = ListOptions(sortFields: sorts.filter { $0 == "createdAt" } + sorts.filter { $0 != "createdAt" },
                              searchable: store.isSearchable, geographic: geographic)
        self.readInput = readInput
        self.inputOf = inputOf
    }

    func register(in router: inout Router) {
        let item = path + "/{id}"
        router.add(.GET, path, .inline(list))
        router.add(.POST, path, write(create))
        router.add(.GET, item, .inline(get))
        router.add(.PUT, item, write(replace))
        router.add(.PATCH, item, write(patch))
        router.add(.DELETE, item, write(delete))
    }

    // MARK: Reads

    private func list(_ request: HTTPRequest) throws -> HTTPResponse {
        let query = try ListParameters.parse(request, options: options)
        let started = Self.now()
        let page = try store.renderedList(query)
        metrics.observeRead(seconds: Self.now() - started)
        var headers: [(name: String, value: String)] = [("Content-Type", JSONResponse.contentType)]
        if let cursor = page.nextCursor {
            headers.append(("Link", "<\(path)?\(ListParameters.nextQuery(request, cursor: cursor))>; rel=\"next\""))
        }
        return HTTPResponse(status: .ok, headers: headers, body: page.json)
    }

    private func get(_ request: HTTPRequest) throws -> HTTPResponse {
        let id = try Self.id(request)
        let started = Self.now()
        let found = try store.rendered(id)
        metrics.observeRead(seconds: Self.now() - started)
        guard let resource = found else { throw APIError.notFound }
        if try ETag.noneMatch(request, version: resource.version) {
            return HTTPResponse(status: .notModified, headers: [("ETag", ETag.header(resource.version))])
        }
        return Self.response(resource)
    }

    // MARK: Writes

    private func create(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let input = try readInput(RequestBody.object(request, mediaType: RequestBody.json))
        store.create(input) { [path] result in
            done(result.map { resource in
                Self.response(resource, status: .created, headers: [("Location", "\(path)/\(resource.id)")])
            })
        }
    }

    private func replace(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        let input = try readInput(RequestBody.object(request, mediaType: RequestBody.json))
        store.replace(id, with: input, preconditions: preconditions) { done(Self.updated($0)) }
    }

    private func patch(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        let changes = JSONValue.object(try RequestBody.object(request, mediaType: RequestBody.mergePatch))
        store.update(id, preconditions: preconditions, completion: { done(Self.updated($0)) }) { [inputOf, readInput] model throws in
            let document = try JSONValue.parse(JSONResponse.encoder.encode(inputOf(model)))
            guard case let .object(merged) = JSONValue.mergePatch(document, changes) else { throw APIError.validation([]) }
            return try readInput(merged)
        }
    }

    private func delete(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        store.delete(id, preconditions: preconditions) { result in
            done(result.map { HTTPResponse(status: .noContent) })
        }
    }

    // MARK: Helpers

    typealias Completion = @Sendable (Result<HTTPResponse, any Error>) -> Void

    /// Monotonic seconds.
    private static func now() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1_000_000_000
    }

    /// A handler whose work finishes later (a durable write) and answers through `done`;
    /// the time from submission to answer is recorded as a database write.
    private func write(_ body: @escaping @Sendable (HTTPRequest, @escaping Completion) throws -> Void) -> Handler {
        .deferred { [metrics] request, responder in
            let started = Self.now()
            let done: Completion = { result in
                metrics.observeWrite(seconds: Self.now() - started)
                switch result {
                case let .success(response): responder.respond(response)
                case let .failure(error): responder.fail(error)
                }
            }
            do { try body(request, done) } catch { responder.fail(error) }
        }
    }

    private static func updated(_ result: Result<RenderedResource, any Error>) -> Result<HTTPResponse, any Error> {
        result.map { response($0) }
    }

    /// A rendered resource with its `ETag`.
    private static func response(_ resource: RenderedResource, status: HTTPStatus = .ok, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", JSONResponse.contentType), ("ETag", ETag.header(resource.version))] + headers,
                     body: resource.json)
    }

    static func id(_ request: HTTPRequest) throws(APIError) -> CatalogID {
        let text = request.pathParameters["id"] ?? ""
        guard let id = CatalogID(text) else { throw .invalidID(text) }
        return id
    }
}
