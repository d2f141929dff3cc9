import CatalogModels
import CatalogSchema
import CatalogStore
import HTTPServer

/// Comments on playable items, with one level of replies:
/// `/v1/playable-items/{id}/comments` (top-level, newest first), `/v1/comments/{id}`
/// and `/v1/comments/{id}/replies` (oldest first). A comment deleted while it has replies
/// stays as a tombstone. Signed-in callers post, as the comment's writer; only the
/// writer, editors and admins edit or delete.
struct Comments: Sendable {
    let store: CommentStore
    let endpoints: ResourceEndpoints

    init(_ store: CatalogStore, metrics: Metrics) {
        self.store = store.comments
        endpoints = ResourceEndpoints(store.comments.resources, catalog: store, metrics: metrics)
    }

    func register(in routes: inout Routes) {
        let onItem = "/v1/playable-items/{id}/comments"
        let comment = endpoints.path + "/{id}"
        routes.add(
            .GET, onItem, .read,
            endpoints.list(scope: { request, _ throws(APIError) in .commentsOn(item: try Self.id(request)) }, descending: true))
        routes.add(.POST, onItem, .member, endpoints.write(post))
        routes.add(.GET, comment, .read, endpoints.get)
        routes.add(.PATCH, comment, .member, endpoints.write(endpoints.patch))
        routes.add(.DELETE, comment, .member, endpoints.write(delete))
        routes.add(
            .GET, comment + "/replies", .read,
            endpoints.list(scope: { request, _ throws(APIError) in .repliesTo(comment: try Self.id(request)) }, descending: false))
    }

    private func post(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let itemID = try Self.id(request)
        let writer = try caller.user()
        let schema = store.resources.schema
        let values = try RequestBody.values(request, schema.creation, mediaType: RequestBody.json)
        store.post(on: itemID, by: writer, values, options: options) { result in
            done(result.map { comment in ResourceEndpoints.created(comment, in: schema) })
        }
    }

    private func delete(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        try endpoints.checkMayChange(id, caller)
        let preconditions = try ETag.preconditions(request)
        store.delete(id, preconditions: preconditions, options: options) { result in
            done(result.map { HTTPResponse(status: .noContent) })
        }
    }

    private static func id(_ request: HTTPRequest) throws(APIError) -> CatalogID {
        try ResourceEndpoints.id(request)
    }
}
