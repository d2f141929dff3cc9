/// The change feed (`GET /v1/changes`): what its changes carry besides a resource.
package enum ChangeFeedSchema {
    /// The filter to one playable item: its own changes and its comments'.
    package static let itemFilter = "playableItemId"

    /// The members of each entry a playlist's change lists, in position order: those of
    /// a playlist's import record (the entry's id, its item's id, when it was added).
    package static let entry = PlaylistEntrySchema.record
}
