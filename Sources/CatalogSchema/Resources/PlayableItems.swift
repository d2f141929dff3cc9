import CatalogModels

extension ResourceSchema {
    /// Streaming videos: `/v1/playable-items`, searchable by title and description.
    /// `include=comments,playlists` embeds the first pages of the item's comments and of
    /// the playlists holding it; `include=viewerState` the caller's own progress, favorite
    /// and rating. `likeCount` and `viewCount` add up every viewer's (``ViewerSchema``).
    /// `video` is the video the catalog hosts for it (``Video``), which only the server writes.
    package static let playableItem = ResourceSchema(
        type: "playableItem", noun: "playable item", path: "/v1/playable-items", table: "playable_items",
        fields: [
            .text("title", rule: PlayableItemInput.titleRule, sortable: true, search: 10),
            .text("description", rule: PlayableItemInput.descriptionRule, default: "", search: 1),
            .url("streamURL", column: "stream_url"),
            .url("thumbnailURL", column: "thumbnail_url", required: false),
            .number("durationSeconds", column: "duration_seconds", rule: PlayableItemInput.durationRule, required: false),
            SchemaField("video", .column("video"), .video, access: .serverSet, required: false, nullable: true, import: .ignored),
        ],
        searchTable: "playable_items_fts", cachesRenderings: true, includes: ["comments", "playlists", ViewerSchema.stateInclude],
        image: ImageSlot("poster"), counted: true)
}
