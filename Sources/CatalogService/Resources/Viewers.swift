import CatalogIdentity
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// What each viewer keeps for itself, under `/v1/me`: its progress in each item (a
/// player's heartbeats), "Continue watching", favorites and ratings; and the views every
/// viewer reports (`POST /v1/playable-items/{id}/views`). Every `/v1/me` route is the
/// caller's own: no path or body names another user, admins included; answers are `private`.
struct Viewers: Sendable {
    let store: CatalogStore

    func register(in routes: inout Routes) {
        registerProgress(in: &routes)
        registerFavorites(in: &routes)
        registerRatings(in: &routes)
        // Anyone who may read items reports views; a view counts once a day per viewer.
        routes.add(
            .POST, ResourceSchema.playableItem.path + "/{id}/views", .read, replaysAnswers: false,
            .later { [counts = store.counts] request, caller, options, done in
                let item = try ResourceEndpoints.id(request)
                let values = try RequestBody.values(request, ViewerSchema.view, mediaType: RequestBody.json)
                guard let view = ViewerSchema.view(values) else { throw APIError.validation([]) }
                let viewer = Self.viewerKey(view, caller, request, key: try counts.digestKey())
                // Most reports cannot count (counted already, or not played long enough): a read tells.
                guard try counts.mayCount(view, item: item, viewer: viewer) else { return done(Result { try Self.json(ViewAnswer(counted: false)) }) }
                counts.count(view, item: item, viewer: viewer, options: options, completion: Self.answering(done))
            })
    }

    private func registerProgress(in routes: inout Routes) {
        let one = "/v1/me/progress/{playableItemId}"
        routes.add(
            .PUT, one, .member,
            .later { [progress = store.progress] request, caller, options, done in
                let item = try ResourceEndpoints.id(request, ViewerSchema.itemParameter)
                let values = try RequestBody.values(request, ViewerSchema.heartbeat, mediaType: RequestBody.json)
                guard let heartbeat = ViewerSchema.heartbeat(values) else { throw APIError.validation([]) }
                progress.record(heartbeat, user: try caller.user(), item: item, options: options, completion: Self.answering(done))
            })
        routes.add(
            .GET, one, .member,
            .inline { [progress = store.progress] request, caller in
                let item = try ResourceEndpoints.id(request, ViewerSchema.itemParameter)
                guard let found = try progress.progress(user: try caller.user(), item: item) else { throw APIError.noProgress }
                return try Self.json(found)
            })
        routes.add(
            .DELETE, one, .member,
            .later { [progress = store.progress] request, caller, options, done in
                let item = try ResourceEndpoints.id(request, ViewerSchema.itemParameter)
                progress.forget(user: try caller.user(), item: item, options: options) { result in
                    done(result.flatMap { existed in existed ? .success(HTTPResponse(status: .noContent)) : .failure(APIError.noProgress) })
                }
            })
        routes.add(
            .GET, "/v1/me/continue-watching", .member,
            .inline { [progress = store.progress] request, caller in
                let values = try QueryParameters.parse(request, accepted: ["limit", "cursor"])
                let page = try progress.continueWatching(user: try caller.user(), limit: ListParameters.limit(values), cursor: ListParameters.cursor(values))
                return Self.page(page)
            })
        routes.add(
            .GET, "/v1/me/up-next", .member,
            .inline { [entries = store.entries] request, caller in
                let values = try QueryParameters.parse(request, accepted: ["limit"])
                return Self.page(try entries.upNext(user: try caller.user(), viewer: caller.viewer, limit: ListParameters.limit(values)))
            })
        // Everything held about the caller: off the event loops (it reads all of it), as
        // an expensive request, and never stored by a cache.
        routes.add(
            .GET, "/v1/me/export", .member, rate: .expensive, caching: .noStore,
            .blocking { [store] request, caller, _ in
                _ = try QueryParameters.parse(request, accepted: [])
                return HTTPResponse(
                    status: .ok,
                    headers: [("Content-Type", "application/x-ndjson"), ("Content-Disposition", "attachment; filename=\"catalog-export.ndjson\"")],
                    body: try store.export(user: try caller.user()))
            })
    }

    private func registerFavorites(in routes: inout Routes) {
        let one = "/v1/me/favorites/{type}/{id}"
        routes.add(
            .PUT, one, .member,
            .later { [favorites = store.favorites] request, caller, options, done in
                let (type, id) = try Self.favorite(request)
                favorites.add(type, id, user: try caller.user(), viewer: caller.viewer, options: options) { result in
                    done(result.map { added in HTTPResponse(status: added ? .created : .noContent) })
                }
            })
        routes.add(
            .DELETE, one, .member,
            .later { [favorites = store.favorites] request, caller, options, done in
                let (type, id) = try Self.favorite(request)
                favorites.remove(type, id, user: try caller.user(), options: options) { result in
                    done(result.flatMap { existed in existed ? .success(HTTPResponse(status: .noContent)) : .failure(APIError.noFavorite) })
                }
            })
        routes.add(
            .GET, "/v1/me/favorites", .member,
            .inline { [favorites = store.favorites] request, caller in
                let values = try QueryParameters.parse(request, accepted: ["limit", "cursor", "type"])
                let type = try values["type"].map { text throws(APIError) in
                    guard let type = FavoriteType(pathSegment: text) else { throw APIError.invalidParameter("type", "names " + Self.kinds(text)) }
                    return type
                }
                return Self.page(
                    try favorites.page(
                        user: try caller.user(), type: type, viewer: caller.viewer, limit: ListParameters.limit(values), cursor: ListParameters.cursor(values)
                    ))
            })
    }

    private func registerRatings(in routes: inout Routes) {
        let one = "/v1/me/ratings/{playableItemId}"
        routes.add(
            .PUT, one, .member,
            .later { [ratings = store.ratings] request, caller, options, done in
                let item = try ResourceEndpoints.id(request, ViewerSchema.itemParameter)
                let values = try RequestBody.values(request, ViewerSchema.rating, mediaType: RequestBody.json)
                guard let rating = values["rating"]?.text.flatMap(Rating.init(rawValue:)) else { throw APIError.validation([]) }
                ratings.rate(rating, user: try caller.user(), item: item, options: options, completion: Self.answering(done))
            })
        routes.add(
            .GET, one, .member,
            .inline { [ratings = store.ratings] request, caller in
                try Self.json(try ratings.rating(user: try caller.user(), item: try ResourceEndpoints.id(request, ViewerSchema.itemParameter)))
            })
    }

    /// The type and id `/v1/me/favorites/{type}/{id}` names (a request that takes no body:
    /// one sent is refused, not ignored).
    private static func favorite(_ request: HTTPRequest) throws -> (FavoriteType, CatalogID) {
        guard request.body.isEmpty else { throw APIError(status: .badRequest, code: "unexpectedBody", detail: "This request takes no body.") }
        let segment = request.pathParameters["type"] ?? ""
        guard let type = FavoriteType(pathSegment: segment) else {
            throw APIError(status: .badRequest, code: "invalidFavoriteType", detail: "The path names " + kinds(segment))
        }
        return (type, try ResourceEndpoints.id(request))
    }

    /// '…' is not a kind of favorite, and which are.
    private static func kinds(_ text: String) -> String {
        "'\(text.prefix(64))', which is not a kind of favorite; the kinds are \(FavoriteType.allCases.map(\.pathSegment).joined(separator: ", "))."
    }

    /// Who a view report counts for: the signed-in caller, or the anonymous session of its
    /// address (a session id is the client's word, so it counts only with the address it
    /// comes from). Kept as HMACs under the catalog's `key`: neither the session id nor the
    /// address is stored, and a digest cannot be reversed without the key.
    private static func viewerKey(_ view: ViewInput, _ caller: Caller, _ request: HTTPRequest, key: [UInt8]) -> ViewerKey {
        if let user = caller.userID { return .user(user) }
        let address = Crypto.hex(Crypto.hmacSHA256(key: key, Array(("address " + request.clientAddress).utf8)))
        let session = Crypto.hex(Crypto.hmacSHA256(key: key, Array(("session " + address + " " + view.sessionId).utf8)))
        return .session(digest: session, address: address)
    }

    /// A completion that answers a store's result as JSON (or its error as a problem).
    private static func answering<Value: Encodable & Sendable>(_ done: @escaping Completion) -> @Sendable (Result<Value, any Error>) -> Void {
        { result in done(result.flatMap { value in Result { try json(value) } }) }
    }

    /// `value` as a JSON answer.
    private static func json(_ value: some Encodable) throws -> HTTPResponse {
        HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType)], body: Array(try JSONResponse.encoder.encode(value)))
    }

    /// A page the store wrote.
    private static func page(_ json: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType)], body: json)
    }
}

extension APIError {
    /// 404: the viewer has no progress in the item (never played it, or forgot it).
    static let noProgress = APIError(status: .notFound, code: "notFound", detail: "You have no progress in this item.")
    /// 404: the resource is not one of the viewer's favorites.
    static let noFavorite = APIError(status: .notFound, code: "notFound", detail: "This is not one of your favorites.")
}
