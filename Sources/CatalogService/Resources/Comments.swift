import CatalogModels
import CatalogSchema
import CatalogStore
import HTTPServer

/// Comments on playable items, with one level of replies:
/// `/v1/playable-items/{id}/comments` (top-level, newest first), `/v1/comments/{id}`
/// and `/v1/comments/{id}/replies` (oldest first). A comment deleted while it has replies
/// stays as a tombstone.
struct Comments: Sendable {
    let store: CommentStore
    let endpoints: ResourceEndpoints<Comment, CommentEdit>

    init(_ store: CatalogStore, metrics: Metrics) {
        self.store = store.comments
        endpoints = ResourceEndpoints(store.comments.resources, catalog: store, metrics: metrics)
    }

    func register(in router: inout Router) {
        let onItem = "/v1/playable-items/{id}/comments"
        let comment = endpoints.path + "/{id}"
        router.add(.GET, onItem, endpoints.list(scope: { request throws(APIError) in .commentsOn(item: try Self.id(request)) }, descending: true))
        router.add(.POST, onItem, endpoints.write(post))
        router.add(.GET, comment, endpoints.get)
        router.add(.PATCH, comment, endpoints.write(endpoints.patch))
        router.add(.DELETE, comment, endpoints.write(delete))
        router.add(.GET, comment + "/replies",
                   endpoints.list(scope: { request throws(APIError) in .repliesTo(comment: try Self.id(request)) }, descending: false))
    }

    private func post(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let itemID = try Self.id(request)
        let schema = store.resources.schema
        let values = try RequestBody.values(request, schema.creation, mediaType: RequestBody.json)
        store.post(on: itemID, values) { result in
            done(result.map { comment in ResourceEndpoints<Comment, CommentEdit>.created(comment, in: schema) })
        }
    }

    private func delete(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        store.delete(id, preconditions: preconditions) { result in
            done(result.map { HTTPResponse(status: .noContent) })
        }
    }

    private static func id(_ request: HTTPRequest) throws(APIError) -> CatalogID {
        try ResourceEndpoints<Comment, CommentEdit>.id(request)
    }
}
