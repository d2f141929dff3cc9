import CatalogModels

extension ResourceSchema {
    /// Ordered lists of playable items: `/v1/playlists`, searchable by title and
    /// description. `include=entries` embeds the first page of entries;
    /// `playableItemId=…` lists the playlists holding an item. The entries are declared
    /// in ``PlaylistEntrySchema``.
    package static let playlist = ResourceSchema(
        type: "playlist", noun: "playlist", path: "/v1/playlists", table: "playlists",
        fields: [
            .text("title", rule: PlaylistInput.titleRule, sortable: true, search: 10),
            .text("description", rule: PlaylistInput.descriptionRule, default: "", search: 1),
            .server("entryCount", .column("entry_count"), .integer(.integer(in: 0...PlaylistOrder.legacyMaxEntries))),
            .owner("ownerId", column: "owner_id"),
            .choice("visibility", rule: Visibility.rule, default: Visibility.public.rawValue),
            .server("entries", .none, .documents(PlaylistEntrySchema.record, maxCount: PlaylistOrder.legacyMaxEntries), import: .nested),
        ],
        searchTable: "playlists_fts", includes: ["entries"],
        filters: ["playableItemId": { .playlistsContaining(item: $0) }], scopes: [.playlistsContaining],
        ownership: Ownership(
            owner: "owner_id", hiddenWhen: (column: "visibility", value: Visibility.private.rawValue),
            quota: PlaylistInput.maxPerUser),
        image: ImageSlot("cover"),
        recordRules: { record in
            guard case let .documents(entries)? = record["entries"] else { return [] }
            var seen = Set<String>()
            var errors: [FieldError] = []
            for (offset, entry) in entries.enumerated() {
                guard let id = entry["entryId"]?.text, !seen.insert(id).inserted else { continue }
                errors.append(Violation(.invalidFormat, "Repeats an entryId of this playlist.").at("/entries/\(offset)/entryId"))
            }
            return errors
        })
}

/// The entries of playlists (`/v1/playlists/{id}/entries`): the document of an entry,
/// and the bodies that insert, move and reorder them.
package enum PlaylistEntrySchema {
    /// An entry as rendered: its item embedded whole.
    package static let document: [SchemaField] = [
        .server("entryId", .column("id"), .id(references: nil)),
        .server("playlistId", .derived("playlist_id"), .id(references: nil)),
        .server("position", .derived("position"), .integer(PlaylistEntryInput.positionRule)),
        .server("playableItem", .none, .resource(.playableItem)),
        .server("addedAt", .column("created_at"), .timestamp),
    ]

    /// `POST …/entries`: the item, and where to insert it (appended when absent).
    package static let insertion = DocumentShape([
        SchemaField("playableItemId", .none, .id(references: .playableItems)),
        SchemaField("position", .column("position"), .integer(PlaylistEntryInput.positionRule), required: false, nullable: true),
    ])

    /// `PATCH …/entries/{entryId}` (a merge patch): the new position.
    package static let move = DocumentShape(
        [SchemaField("position", .column("position"), .integer(PlaylistEntryInput.newPositionRule))],
        readOnly: Set(document.map(\.name)))

    /// `PUT …/entries`: the whole new order, as item ids.
    package static let order = DocumentShape([
        SchemaField("playableItemIds", .none, .ids(references: .playableItems, maxCount: PlaylistOrder.maxEntries))
    ])

    /// An entry of a playlist's import record.
    package static let record = DocumentShape([
        SchemaField("entryId", .column("id"), .id(references: nil)),
        SchemaField("playableItemId", .none, .id(references: .playableItems)),
        SchemaField("addedAt", .column("created_at"), .timestamp),
    ])
}

extension ScopeKind {
    /// The playlists holding a playable item.
    public static let playlistsContaining = ScopeKind(
        name: "playlistsContaining",
        filter: "t.pk IN (SELECT e.playlist_pk FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk WHERE i.id = ?)")
}
