import CatalogModels
import Foundation

/// `/v1/me/progress`, `/v1/me/continue-watching` and `/v1/me/up-next`: where the signed-in viewer is in each
/// item, on every device of theirs.
public struct ProgressClient: Sendable {
    let client: CatalogClient

    /// Sends a player's heartbeat for `item` (every few seconds while playing, and on pause
    /// or stop). The answer says whether it changed anything (`applied` is false for an
    /// older playback's) and what the progress now is.
    public func record(_ heartbeat: ProgressInput, for item: CatalogID) async throws(CatalogClientError) -> ProgressAnswer {
        try client.decode(
            ProgressAnswer.self,
            from: await client.send("PUT", "/v1/me/progress/\(item)", body: client.encode(heartbeat), contentType: "application/json").data)
    }

    /// The viewer's progress in `item`, or `nil` when it has none.
    public func get(_ item: CatalogID) async throws(CatalogClientError) -> PlaybackProgress? {
        do {
            return try client.decode(PlaybackProgress.self, from: await client.send("GET", "/v1/me/progress/\(item)").data)
        } catch let error where error.problem?.status == 404 {
            return nil
        }
    }

    /// Forgets the viewer's progress in `item`: it leaves "Continue watching".
    public func forget(_ item: CatalogID) async throws(CatalogClientError) {
        _ = try await client.send("DELETE", "/v1/me/progress/\(item)")
    }

    /// One page of "Continue watching": items begun and not finished, most recently watched first.
    public func continueWatching(limit: Int? = nil, cursor: String? = nil) async throws(CatalogClientError) -> Page<ContinueWatchingEntry> {
        var query: [URLQueryItem] = []
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        return try client.decode(Page<ContinueWatchingEntry>.self, from: await client.send("GET", "/v1/me/continue-watching", query: query).data)
    }

    /// "Up next": for each playlist the viewer is going through (its own and its favorites),
    /// the entry after the one it finished most recently, most recently watched first.
    public func upNext(limit: Int? = nil) async throws(CatalogClientError) -> [UpNextEntry] {
        let query = limit.map { [URLQueryItem(name: "limit", value: String($0))] } ?? []
        return try client.decode(Page<UpNextEntry>.self, from: await client.send("GET", "/v1/me/up-next", query: query).data).items
    }
}

extension CatalogClient {
    /// The signed-in viewer's progress and "Continue watching".
    public var progress: ProgressClient { ProgressClient(client: self) }
}
