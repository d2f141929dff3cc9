import CatalogModels
import Foundation

/// `/v1/me/favorites` and `/v1/me/ratings`: the signed-in viewer's favorites and ratings,
/// and `POST /v1/playable-items/{id}/views`.
public struct ViewerClient: Sendable {
    let client: CatalogClient

    /// Makes the resource `id` of `type` one of the viewer's favorites (again is harmless).
    public func addFavorite(_ type: FavoriteType, _ id: CatalogID) async throws(CatalogClientError) {
        _ = try await client.send("PUT", "/v1/me/favorites/\(type.pathSegment)/\(id)")
    }

    /// Removes the resource from the viewer's favorites (a 404 when it was not one).
    public func removeFavorite(_ type: FavoriteType, _ id: CatalogID) async throws(CatalogClientError) {
        _ = try await client.send("DELETE", "/v1/me/favorites/\(type.pathSegment)/\(id)")
    }

    /// One page of the viewer's favorites (of `type` only, when given), most recent first.
    public func favorites(_ type: FavoriteType? = nil, limit: Int? = nil, cursor: String? = nil) async throws(CatalogClientError) -> Page<Favorite> {
        var query: [URLQueryItem] = []
        if let type { query.append(URLQueryItem(name: "type", value: type.pathSegment)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        return try client.decode(Page<Favorite>.self, from: await client.send("GET", "/v1/me/favorites", query: query).data)
    }

    /// Rates `item` (`none` takes a rating back).
    @discardableResult
    public func rate(_ item: CatalogID, _ rating: Rating) async throws(CatalogClientError) -> ItemRating {
        try client.decode(
            ItemRating.self,
            from: await client.send("PUT", "/v1/me/ratings/\(item)", body: client.encode(RatingInput(rating: rating)), contentType: "application/json").data)
    }

    /// The viewer's rating of `item`.
    public func rating(_ item: CatalogID) async throws(CatalogClientError) -> ItemRating {
        try client.decode(ItemRating.self, from: await client.send("GET", "/v1/me/ratings/\(item)").data)
    }

    /// The viewer's own changes (progress, favorites, ratings) since `token` (`nil`: all of
    /// its state, as a snapshot), at most `limit`; with `wait`, the server holds the request
    /// up to that many seconds until there is one. Tokens are the viewer's own.
    public func changes(since token: String?, limit: Int? = nil, wait: Int? = nil) async throws(CatalogClientError) -> ViewerChangePage {
        var query: [URLQueryItem] = []
        if let token { query.append(URLQueryItem(name: "since", value: token)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let wait { query.append(URLQueryItem(name: "wait", value: String(wait))) }
        let timeout = wait.map { client.timeout + TimeInterval(max(0, $0)) }
        return try client.decode(ViewerChangePage.self, from: await client.send("GET", "/v1/me/changes", query: query, timeout: timeout).data)
    }

    /// Everything the catalog holds about the viewer, as NDJSON: one `{"data":…,"type":"…"}`
    /// line each (``AccountExportType``).
    public func export() async throws(CatalogClientError) -> Data {
        try await client.send("GET", "/v1/me/export").data
    }

    /// Reports that a player is playing `item`: whether this report counted a view.
    @discardableResult
    public func reportView(_ view: ViewInput, of item: CatalogID) async throws(CatalogClientError) -> Bool {
        try client.decode(
            ViewAnswer.self,
            from: await client.send("POST", "/v1/playable-items/\(item)/views", body: client.encode(view), contentType: "application/json").data
        ).counted
    }
}

extension CatalogClient {
    /// The signed-in viewer's favorites and ratings, and view reports.
    public var viewer: ViewerClient { ViewerClient(client: self) }
}
