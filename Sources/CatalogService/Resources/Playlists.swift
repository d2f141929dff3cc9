import CatalogModels
import CatalogStore

/// `/v1/playlists`: ordered lists of playable items. `include=entries` embeds the first
/// page of entries; `playableItemId=…` lists the playlists holding an item. The entries
/// themselves are in ``PlaylistEntries``.
enum Playlists {
    static func endpoints(_ store: CatalogStore, metrics: Metrics) -> ResourceEndpoints<Playlist, PlaylistInput> {
        ResourceEndpoints(
            metrics: metrics, path: "/v1/playlists", store: store.playlists, body: body,
            filters: ["playableItemId": { .playlistsContaining(item: $0) }], includes: ["entries": store.playlistEntries],
            readInput: read, inputOf: PlaylistInput.init)
    }

    static let body = BodyFields(writable: ["title", "description"], readOnly: ["entryCount", "entries"])

    static func read(_ object: [String: JSONValue]) throws(APIError) -> PlaylistInput {
        var reader = FieldReader(object, body)
        let title = reader.string("title", required: true) { Rules.text($0, length: PlaylistInput.titleLength) }
        let description = reader.string("description", required: false) { Rules.text($0, length: PlaylistInput.descriptionLength, multiline: true) }
        try reader.finish()
        guard let title else { throw .validation(reader.errors) }
        return PlaylistInput(title: title, description: description ?? "")
    }
}
