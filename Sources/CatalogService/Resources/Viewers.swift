import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// What each viewer keeps for itself, under `/v1/me`: its progress in each item (a
/// player's heartbeats) and "Continue watching". Every route is the caller's own: no
/// path or body names another user, admins included; answers are `private`.
struct Viewers: Sendable {
    let progress: ProgressStore

    func register(in routes: inout Routes) {
        let one = "/v1/me/progress/{playableItemId}"
        routes.add(
            .PUT, one, .member,
            .later { [progress] request, caller, options, done in
                let item = try ResourceEndpoints.id(request, ViewerSchema.itemParameter)
                let values = try RequestBody.values(request, ViewerSchema.heartbeat, mediaType: RequestBody.json)
                guard let heartbeat = ViewerSchema.heartbeat(values) else { throw APIError.validation([]) }
                progress.record(heartbeat, user: try caller.user(), item: item, options: options) { result in
                    done(result.flatMap { answer in Result { try Self.json(answer) } })
                }
            })
        routes.add(
            .GET, one, .member,
            .inline { [progress] request, caller in
                let item = try ResourceEndpoints.id(request, ViewerSchema.itemParameter)
                guard let found = try progress.progress(user: try caller.user(), item: item) else { throw APIError.noProgress }
                return try Self.json(found)
            })
        routes.add(
            .DELETE, one, .member,
            .later { [progress] request, caller, options, done in
                let item = try ResourceEndpoints.id(request, ViewerSchema.itemParameter)
                progress.forget(user: try caller.user(), item: item, options: options) { result in
                    done(result.flatMap { existed in existed ? .success(HTTPResponse(status: .noContent)) : .failure(APIError.noProgress) })
                }
            })
        routes.add(
            .GET, "/v1/me/continue-watching", .member,
            .inline { [progress] request, caller in
                let values = try QueryParameters.parse(request, accepted: ["limit", "cursor"])
                let page = try progress.continueWatching(user: try caller.user(), limit: ListParameters.limit(values), cursor: ListParameters.cursor(values))
                return HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType)], body: page)
            })
    }

    /// `value` as a JSON answer.
    private static func json(_ value: some Encodable) throws -> HTTPResponse {
        HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType)], body: Array(try JSONResponse.encoder.encode(value)))
    }
}

extension APIError {
    /// 404: the viewer has no progress in the item (never played it, or forgot it).
    static let noProgress = APIError(status: .notFound, code: "notFound", detail: "You have no progress in this item.")
}
