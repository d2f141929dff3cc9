import CatalogModels
import Foundation
import GRDB

/// `playable_items`: streaming videos, searchable by title and description.
enum PlayableItemTable: ResourceTable {
    static let table = "playable_items"
    static let dataColumns = ["title", "description", "stream_url", "thumbnail_url", "duration_seconds"]
    static let sortColumns = ["createdAt": "created_at", "title": "title"]
    static let search: (table: String, weights: String)? = ("playable_items_fts", "10.0, 1.0")
    static let renderer = RowRenderer([
        RenderedField("id", "id", .text), RenderedField("title", "title", .text), RenderedField("description", "description", .text),
        RenderedField("streamURL", "stream_url", .text), RenderedField("thumbnailURL", "thumbnail_url", .text),
        RenderedField("durationSeconds", "duration_seconds", .real), RenderedField("createdAt", "created_at", .timestamp),
        RenderedField("updatedAt", "updated_at", .timestamp), RenderedField("version", "version", .integer),
    ])

    static func values(_ input: PlayableItemInput) -> [(any DatabaseValueConvertible)?] {
        [input.title, input.description, input.streamURL.absoluteString, input.thumbnailURL?.absoluteString, input.durationSeconds]
    }

    /// Deleting an item removes its entries from every playlist (comments go by cascade).
    static func willDelete(_ db: Database, id: CatalogID) throws {
        try PlaylistEntryStore.removeItem(db, itemID: id)
    }

    static let deletionWritesMore = true
    static let cachesRenderings = true

    static func model(_ row: Row) -> PlayableItem {
        let meta = meta(row)
        return PlayableItem(
            id: meta.id, title: row["title"], description: row["description"],
            streamURL: URL(string: row["stream_url"]) ?? URL(fileURLWithPath: "/"),
            thumbnailURL: (row["thumbnail_url"] as String?).flatMap(URL.init(string:)),
            durationSeconds: row["duration_seconds"],
            createdAt: meta.createdAt, updatedAt: meta.updatedAt, version: meta.version)
    }
}
