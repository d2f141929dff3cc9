import CatalogModels
import Foundation

extension CatalogClient {
    /// Every resource of the catalog as records, in the order an import needs them:
    /// games, locations, playable items, playlists (with their entries), then the
    /// comments, then their replies. Read page by page through the public API (the
    /// comments twice through the change feed, a thousand a page, rather than a request
    /// per item); a catalog that changes meanwhile may be caught half-way.
    public func exportRecords() -> AsyncThrowingStream<CatalogRecord, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    let all = ListQuery(limit: 100, sort: "createdAt")
                    for try await game in games.all(all) { continuation.yield(.game(game)) }
                    for try await location in locations.all(all) { continuation.yield(.location(location)) }
                    var itemIDs: Set<CatalogID> = []
                    for try await item in playableItems.all(all) {
                        itemIDs.insert(item.id)
                        continuation.yield(.playableItem(item))
                    }
                    for try await playlist in playlists.all(all) {
                        var entries: [PlaylistEntry] = []
                        for try await entry in self.entries(of: playlist.id).all(ListQuery(limit: 100)) { entries.append(entry) }
                        continuation.yield(.playlist(PlaylistRecord(playlist, entries: entries)))
                    }
                    // Comments before replies (a reply needs its comment), each once, and only
                    // those whose item (and comment) the export holds: the catalog may change
                    // while it is read. A pass whose token expires (a purge of old deletions
                    // ran meanwhile) starts again from the beginning of the feed.
                    var exported: Set<CatalogID> = []
                    for replies in [false, true] {
                        var token: String?
                        while true {
                            let page: ChangePage
                            do {
                                page = try await changes.page(since: token, limit: ChangesClient.limitRange.upperBound, types: [.comment])
                            } catch {
                                guard token != nil, (error as? CatalogClientError)?.isSyncTokenExpired == true else { throw error }
                                token = nil
                                continue
                            }
                            for change in page.changes {
                                guard case let .comment(comment)? = change.resource, (comment.parentId != nil) == replies,
                                    itemIDs.contains(comment.playableItemId), comment.parentId.map(exported.contains) ?? true,
                                    exported.insert(comment.id).inserted
                                else { continue }
                                continuation.yield(.comment(comment))
                            }
                            guard page.hasMore else { break }
                            token = page.nextToken
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Sends the original of an image exported from another catalog (`data`, as
    /// `GET /v1/images/{hash}` served it there, ``ImageReference/hash``) to this one, which
    /// keeps it as it is once it has checked it (`PUT /admin/images/{hash}`; 422 when `data`
    /// is not what `hash` names): records showing the image can then be imported. Admins only.
    public func importImage(_ data: Data, hash: String) async throws(CatalogClientError) -> ImageReference {
        guard let format = ImageFormat.sniff(data) else { throw .invalidResponse("The data is not a JPEG, PNG, WebP, HEIC or AVIF image.") }
        return try decode(ImageReference.self, from: await send("PUT", "/admin/images/\(hash)", body: data, contentType: format.contentType).data)
    }

    /// Applies up to ``ImportRequest/maxRecords`` records in one transaction on the server
    /// (`POST /admin/import`), ids, times and versions preserved; records already there
    /// with the same content are left alone.
    public func importRecords(_ records: [CatalogRecord]) async throws(CatalogClientError) -> ImportSummary {
        let answer = try await send("POST", "/admin/import", body: encode(ImportRequest(records: records)), contentType: "application/json")
        return try decode(ImportSummary.self, from: answer.data)
    }
}
