import CatalogModels
import CatalogStore

/// `/v1/playable-items`: streaming videos. `include=comments,playlists` embeds the
/// first pages of the item's comments and of the playlists holding it.
enum PlayableItems {
    static func endpoints(_ store: CatalogStore, metrics: Metrics) -> ResourceEndpoints<PlayableItem, PlayableItemInput> {
        ResourceEndpoints(
            metrics: metrics, path: "/v1/playable-items", store: store.items, body: body,
            includes: ["comments": store.itemComments, "playlists": store.itemPlaylists],
            readInput: read, inputOf: PlayableItemInput.init)
    }

    static let body = BodyFields(writable: ["title", "description", "streamURL", "thumbnailURL", "durationSeconds"])

    static func read(_ object: [String: JSONValue]) throws(APIError) -> PlayableItemInput {
        var reader = FieldReader(object, body)
        let title = reader.string("title", required: true) { Rules.text($0, length: PlayableItemInput.titleLength) }
        let description = reader.string("description", required: false) { Rules.text($0, length: PlayableItemInput.descriptionLength, multiline: true) }
        let streamURL = reader.url("streamURL", required: true)
        let thumbnailURL = reader.url("thumbnailURL", required: false)
        let duration = reader.number("durationSeconds", required: false) { Rules.number($0, in: PlayableItemInput.durationRange) }
        try reader.finish()
        guard let title, let streamURL else { throw .validation(reader.errors) }
        return PlayableItemInput(title: title, description: description ?? "", streamURL: streamURL, thumbnailURL: thumbnailURL, durationSeconds: duration)
    }
}
