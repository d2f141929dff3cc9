import CatalogModels
import Foundation

/// The entries of one playlist. Every change answers with the playlist's new `ETag`;
/// pass the last one you have as `ifMatch` so a concurrent change by another app
/// surfaces as ``CatalogClientError/preconditionFailed(_:)`` instead of being overwritten.
///
/// ```swift
/// let playlist = try await client.playlists.get(id)
/// let added = try await client.entries(of: id).add(itemID, ifMatch: playlist.etag)
/// let moved = try await client.entries(of: id).move(added.value.entryId, to: 0, ifMatch: added.etag)
/// ```
public struct PlaylistEntriesClient: Sendable {
    let client: CatalogClient
    /// The playlist.
    public let playlistID: CatalogID

    private var path: String { "/v1/playlists/\(playlistID)/entries" }

    /// One page, in position order (`limit`, `cursor` and `fields` of `query` apply).
    public func list(_ query: ListQuery = ListQuery()) async throws(CatalogClientError) -> Page<PlaylistEntry> {
        try client.decode(Page<PlaylistEntry>.self, from: await client.send("GET", path, query: query.items).data)
    }

    /// Every entry, in order, following `nextCursor`.
    public func all(_ query: ListQuery = ListQuery()) -> AsyncThrowingStream<PlaylistEntry, any Error> {
        client.following(query) { try await list($0) }
    }

    /// One entry.
    public func get(_ entryID: CatalogID) async throws(CatalogClientError) -> PlaylistEntry {
        try client.decode(PlaylistEntry.self, from: await client.send("GET", "\(path)/\(entryID)").data)
    }

    /// The entry after `entryID` ("up next"); `nil` when `entryID` is the last.
    public func next(after entryID: CatalogID) async throws(CatalogClientError) -> PlaylistEntry? {
        do {
            return try client.decode(PlaylistEntry.self, from: await client.send("GET", "\(path)/\(entryID)/next").data)
        } catch let .problem(problem) where problem.code == "endOfPlaylist" {
            return nil
        }
    }

    /// Inserts `itemID` at `position` (appends when `nil`). The tag is the playlist's new one.
    public func add(_ itemID: CatalogID, at position: Int? = nil, ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<PlaylistEntry> {
        try await client.tagged(
            client.send(
                "POST", path, body: client.encode(PlaylistEntryInput(playableItemId: itemID, position: position)),
                contentType: "application/json", headers: client.condition(ifMatch)))
    }

    /// Moves an entry to `position`, shifting the others. The tag is the playlist's new one.
    public func move(_ entryID: CatalogID, to position: Int, ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<PlaylistEntry> {
        try await client.tagged(
            client.send(
                "PATCH", "\(path)/\(entryID)", body: client.encode(["position": position]),
                contentType: "application/merge-patch+json", headers: client.condition(ifMatch)))
    }

    /// Removes an entry, closing the gap. - Returns: the playlist's new tag.
    @discardableResult
    public func remove(_ entryID: CatalogID, ifMatch: String? = nil) async throws(CatalogClientError) -> String {
        let answer = try await client.send("DELETE", "\(path)/\(entryID)", headers: client.condition(ifMatch))
        return answer.response.value(forHTTPHeaderField: "ETag") ?? ""
    }

    /// Replaces the whole order at once. - Returns: the playlist.
    public func replace(with itemIDs: [CatalogID], ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<Playlist> {
        try await client.tagged(
            client.send(
                "PUT", path, body: client.encode(PlaylistOrder(playableItemIds: itemIDs)),
                contentType: "application/json", headers: client.condition(ifMatch)))
    }
}

/// Comments on playable items and their replies.
public struct CommentsClient: Sendable {
    let client: CatalogClient

    /// One page of the top-level comments on an item, newest first unless `query.sort` says `createdAt`.
    public func list(on itemID: CatalogID, _ query: ListQuery = ListQuery()) async throws(CatalogClientError) -> Page<Comment> {
        try client.decode(Page<Comment>.self, from: await client.send("GET", "/v1/playable-items/\(itemID)/comments", query: query.items).data)
    }

    /// Every top-level comment on an item, following `nextCursor`.
    public func all(on itemID: CatalogID, _ query: ListQuery = ListQuery()) -> AsyncThrowingStream<Comment, any Error> {
        client.following(query) { try await list(on: itemID, $0) }
    }

    /// One page of the replies to a comment, oldest first unless `query.sort` says `-createdAt`.
    public func replies(to commentID: CatalogID, _ query: ListQuery = ListQuery()) async throws(CatalogClientError) -> Page<Comment> {
        try client.decode(Page<Comment>.self, from: await client.send("GET", "/v1/comments/\(commentID)/replies", query: query.items).data)
    }

    /// Every reply to a comment, following `nextCursor`.
    public func allReplies(to commentID: CatalogID, _ query: ListQuery = ListQuery()) -> AsyncThrowingStream<Comment, any Error> {
        client.following(query) { try await replies(to: commentID, $0) }
    }

    /// Posts a comment on an item, or a reply when `input.parentId` is set.
    public func post(on itemID: CatalogID, _ input: CommentInput) async throws(CatalogClientError) -> Tagged<Comment> {
        try await client.tagged(
            client.send(
                "POST", "/v1/playable-items/\(itemID)/comments", body: client.encode(input),
                contentType: "application/json"))
    }

    /// One comment (a deleted one with replies comes back with `deleted` and no body).
    public func get(_ id: CatalogID) async throws(CatalogClientError) -> Tagged<Comment> {
        try await client.tagged(client.send("GET", "/v1/comments/\(id)"))
    }

    /// Edits `author` and/or `body`; with `ifMatch`, only if it is still at that version.
    public func patch(_ id: CatalogID, _ changes: MergePatch, ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<Comment> {
        try await client.tagged(
            client.send(
                "PATCH", "/v1/comments/\(id)", body: client.encode(changes),
                contentType: "application/merge-patch+json", headers: client.condition(ifMatch)))
    }

    /// Deletes a comment (one with replies stays as a tombstone).
    public func delete(_ id: CatalogID, ifMatch: String? = nil) async throws(CatalogClientError) {
        _ = try await client.send("DELETE", "/v1/comments/\(id)", headers: client.condition(ifMatch))
    }
}
