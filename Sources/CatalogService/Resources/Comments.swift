import CatalogModels
import CatalogStore
import HTTPServer

/// Comments on playable items, with one level of replies:
/// `/v1/playable-items/{id}/comments` (top-level, newest first), `/v1/comments/{id}`
/// and `/v1/comments/{id}/replies` (oldest first). A deleted comment with replies stays
/// as a tombstone.
struct Comments: Sendable {
    let store: CommentStore
    let endpoints: ResourceEndpoints<Comment, CommentEdit>

    init(_ store: CatalogStore, metrics: Metrics) {
        self.store = store.comments
        endpoints = ResourceEndpoints(metrics: metrics, path: "/v1/comments", store: store.comments.resources, body: Self.edits,
                                      readInput: Self.readEdit, inputOf: Self.edit)
    }

    func register(in router: inout Router) {
        let onItem = "/v1/playable-items/{id}/comments"
        router.add(.GET, onItem, endpoints.list(scope: { request throws(APIError) in .commentsOn(item: try Self.id(request)) }, descending: true))
        router.add(.POST, onItem, endpoints.write(post))
        router.add(.GET, "/v1/comments/{id}", endpoints.get)
        router.add(.PATCH, "/v1/comments/{id}", endpoints.write(endpoints.patch))
        router.add(.DELETE, "/v1/comments/{id}", endpoints.write(delete))
        router.add(.GET, "/v1/comments/{id}/replies",
                   endpoints.list(scope: { request throws(APIError) in .repliesTo(comment: try Self.id(request)) }, descending: false))
    }

    private func post(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let itemID = try Self.id(request)
        var reader = FieldReader(try RequestBody.object(request, mediaType: RequestBody.json), fields: ["author", "body", "parentId"],
                                 readOnly: Self.serverFields)
        let author = reader.string("author", required: true) { Rules.text($0, length: CommentInput.authorLength) }
        let body = reader.string("body", required: true) { Rules.text($0, length: CommentInput.bodyLength, multiline: true) }
        let parentID = reader.id("parentId", required: false)
        try reader.finish()
        guard let author, let body else { throw APIError.validation(reader.errors) }
        store.post(on: itemID, CommentInput(author: author, body: body, parentId: parentID)) { result in
            done(result.map { comment in
                ResourceEndpoints<Comment, CommentEdit>.response(comment, status: .created, headers: [("Location", "/v1/comments/\(comment.id)")])
            })
        }
    }

    private func delete(_ request: HTTPRequest, _ done: @escaping Completion) throws {
        let id = try Self.id(request)
        let preconditions = try ETag.preconditions(request)
        store.delete(id, preconditions: preconditions) { result in
            done(result.map { HTTPResponse(status: .noContent) })
        }
    }

    /// Members of a comment that only the server sets.
    private static let serverFields: Set<String> = ["playableItemId", "deleted", "replyCount"]

    /// What an edit may change: `author` and `body`.
    static let edits = BodyFields(writable: ["author", "body"], readOnly: serverFields.union(["parentId"]))

    /// Reads the document a merge patch produces: `author` and `body`.
    static func readEdit(_ object: [String: JSONValue]) throws(APIError) -> CommentEdit {
        var reader = FieldReader(object, edits)
        let author = reader.string("author", required: true) { Rules.text($0, length: CommentInput.authorLength) }
        let body = reader.string("body", required: true) { Rules.text($0, length: CommentInput.bodyLength, multiline: true) }
        try reader.finish()
        guard let author, let body else { throw APIError.validation(reader.errors) }
        return CommentEdit(author: author, body: body)
    }

    /// The editable document of `comment`; a deleted comment cannot be edited (409).
    static func edit(_ comment: Comment) throws -> CommentEdit {
        guard let body = comment.body, !comment.deleted else {
            throw APIError(status: .conflict, code: "conflict", detail: "The comment was deleted and cannot be edited.")
        }
        return CommentEdit(author: comment.author, body: body)
    }

    private static func id(_ request: HTTPRequest) throws(APIError) -> CatalogID {
        try ResourceEndpoints<Comment, CommentEdit>.id(request)
    }
}
