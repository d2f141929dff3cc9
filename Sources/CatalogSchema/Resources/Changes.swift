import CatalogModels

/// The change feed (`GET /v1/changes`): what its changes carry besides a resource.
package enum ChangeFeedSchema {
    /// The filter to one playable item: its own changes and its comments'.
    package static let itemFilter = "playableItemId"

    /// The type of a playlist entry's changes.
    package static let entryType = "playlistEntry"

    /// A playlist entry's change carries this (``ChangedEntry``): the entry's id, its
    /// playlist's and its item's, when it was added, and its order key.
    package static let entry = DocumentShape([
        SchemaField("entryId", .column("id"), .id(references: nil)),
        SchemaField("playlistId", .derived("playlist_id"), .id(references: nil)),
        SchemaField("playableItemId", .derived("item_id"), .id(references: nil)),
        SchemaField("addedAt", .column("created_at"), .timestamp),
        SchemaField("orderKey", .column("sort_key"), .integer(.integer(in: Int(ChangedEntry.orderKeys.lowerBound)...Int(ChangedEntry.orderKeys.upperBound)))),
    ])
}
