import CatalogModels
import Foundation
import GRDB

/// `playlists`: ordered lists of playable items, searchable by title and description.
/// Their entries live in `playlist_entries` (see ``PlaylistEntryStore``).
enum PlaylistTable: ResourceTable {
    static let table = "playlists"
    static let dataColumns = ["title", "description"]
    static let sortColumns = ["createdAt": "created_at", "title": "title"]
    static let search: (table: String, weights: String)? = ("playlists_fts", "10.0, 1.0")
    static let renderer = RowRenderer([
        RenderedField("id", "id", .text), RenderedField("title", "title", .text), RenderedField("description", "description", .text),
        RenderedField("entryCount", "entry_count", .integer), RenderedField("createdAt", "created_at", .timestamp),
        RenderedField("updatedAt", "updated_at", .timestamp), RenderedField("version", "version", .integer),
    ])

    static func values(_ input: PlaylistInput) -> [(any DatabaseValueConvertible)?] {
        [input.title, input.description]
    }

    static func model(_ row: Row) -> Playlist {
        let meta = meta(row)
        return Playlist(id: meta.id, title: row["title"], description: row["description"], entryCount: row["entry_count"],
                        createdAt: meta.createdAt, updatedAt: meta.updatedAt, version: meta.version)
    }

    static func filter(_ scope: ListRequest.Scope) -> String? {
        guard case .playlistsContaining = scope else { return nil }
        return "t.pk IN (SELECT e.playlist_pk FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk WHERE i.id = ?)"
    }
}
