import CatalogModels
import Foundation

/// `GET /v1/changes`: every change to the catalog, oldest first, page after page. Pass
/// each page's `nextToken` as the next `since`; with `wait`, a request the server has no
/// change for waits up to that many seconds for one (a long-poll), which works on every
/// platform's `URLSession`. ``CatalogSync`` keeps a local copy of the catalog with it.
///
/// ```swift
/// var token: String?
/// while true {
///     let page = try await client.changes.page(since: token, wait: 30)
///     for change in page.changes { print(change.type, change.id, change.deleted) }
///     token = page.nextToken
/// }
/// ```
///
/// A token the server no longer accepts (too old, or from another database) fails with
/// ``CatalogClientError/isSyncTokenExpired``: drop what was synced and start again with
/// `since` `nil`.
public struct ChangesClient: Sendable {
    let client: CatalogClient

    /// The allowed page sizes (100 when not given).
    public static let limitRange = 1...1000
    /// The allowed long-poll waits, in seconds.
    public static let waitRange = 1...60

    /// One page of changes after `since` (from the beginning when `nil`).
    /// - Parameters:
    ///   - since: the `nextToken` of the previous page.
    ///   - limit: at most this many changes, 1…1000 (the server's default is 100).
    ///   - types: only changes to these kinds; `nil` or empty for all.
    ///   - playableItemID: only changes to this item and its comments.
    ///   - wait: when there is no change yet, wait up to this many seconds (1…60) for one
    ///     before answering, possibly with none. The request's timeout is this plus the
    ///     client's ``CatalogClient/timeout``.
    public func page(
        since: String?, limit: Int? = nil, types: [ChangeType]? = nil, playableItemID: CatalogID? = nil, wait: Int? = nil
    )
        async throws(CatalogClientError) -> ChangePage
    {
        var query: [URLQueryItem] = []
        if let since { query.append(URLQueryItem(name: "since", value: since)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let types, !types.isEmpty { query.append(URLQueryItem(name: "types", value: types.map(\.rawValue).joined(separator: ","))) }
        if let playableItemID { query.append(URLQueryItem(name: "playableItemId", value: playableItemID.rawValue)) }
        if let wait { query.append(URLQueryItem(name: "wait", value: String(wait))) }
        let timeout = wait.map { client.timeout + TimeInterval(max(0, $0)) }
        let answer = try await client.send("GET", "/v1/changes", query: query, timeout: timeout)
        return try client.decode(ChangePage.self, from: answer.data)
    }
}
