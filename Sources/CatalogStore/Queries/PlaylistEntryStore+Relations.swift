import CatalogModels
import CatalogSchema

/// What other resources' writes do to entries: a playlist's import record sets its
/// entries, and deleting a playable item removes its entries from every playlist.
extension PlaylistEntryStore {
    /// Applies the entries of a playlist's import record (their ids, items and order) to
    /// the playlist `playlistPK` when they differ from its current ones.
    /// - Returns: whether they did (a change of the playlist).
    static func importEntries(_ db: any SQLConnection, _ record: FieldValues, playlistPK: Int64, pointer: String) throws -> Bool {
        guard let index = record.fields.firstIndex(where: { if case .documents = $0.kind { true } else { false } }),
            case let .documents(entries)? = record.values[index]
        else { return false }
        let member = pointer + record.fields[index].pointer
        func item(_ entry: FieldValues) -> String? { entry.reference(to: .playableItems)?.value?.text }
        let current = try db.fetchRows(
            """
            SELECT e.id, i.id, e.version FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk WHERE e.playlist_pk = ? ORDER BY e.sort_key
            """, [playlistPK]
        ).map { (entry: $0[0].string, item: $0[1].string, version: $0[2].int64 ?? 1) }
        guard !current.elementsEqual(entries, by: { $0.entry == $1[column: "id"]?.text && $0.item == item($1) }) else { return false }
        // Entries written anew keep counting their versions, so the feed never shows one going back.
        let versions = Dictionary(current.compactMap { row in row.entry.map { ($0, row.version) } }, uniquingKeysWith: max)
        try db.execute("DELETE FROM playlist_entries WHERE playlist_pk = ?", [playlistPK])
        var missing: [FieldError] = []
        for (position, entry) in entries.enumerated() {
            let inserted = try db.execute(
                """
                INSERT INTO playlist_entries (id, playlist_pk, item_pk, sort_key, created_at, version)
                SELECT CAST(? AS TEXT), CAST(? AS BIGINT), pk, CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT) FROM playable_items WHERE id = ?
                """,
                [
                    entry[column: "id"]?.sqlValue ?? .null, playlistPK, Int64(position + 1) * EntryOrder.spacing, entry[column: "created_at"]?.sqlValue ?? .null,
                    (entry[column: "id"]?.text.flatMap { versions[$0] } ?? 0) + 1, item(entry),
                ])
            if inserted == 0, let reference = entry.reference(to: .playableItems) {
                missing.append(Reference.playableItems.missing.at(member + "/\(position)" + reference.field.pointer))
            }
        }
        guard missing.isEmpty else { throw StoreError.invalid(missing) }
        try db.execute("UPDATE playlists SET entry_count = ? WHERE pk = ?", [entries.count, playlistPK])
        return true
    }

    /// Removes every entry of the item `itemID` from every playlist, bumping each
    /// playlist's version. Runs inside the item's deletion.
    static func removeItem(_ db: any SQLConnection, itemID: CatalogID) throws {
        // The item's row is locked by its deletion, so no entry of it can be added meanwhile.
        guard let itemPK = try db.fetchValue("SELECT pk FROM playable_items WHERE id = ?", [itemID.rawValue]).int64 else { return }
        let affected = try db.fetchColumn("SELECT DISTINCT playlist_pk FROM playlist_entries WHERE item_pk = ? ORDER BY playlist_pk", [itemPK])
            .compactMap(\.int64)
        guard !affected.isEmpty else { return }
        // Every playlist that changes is locked before any of them changes, in one order.
        for playlistPK in affected { _ = try db.exists("SELECT 1 FROM playlists WHERE pk = ?" + db.dialect.forUpdate, [playlistPK]) }
        try db.execute("DELETE FROM playlist_entries WHERE item_pk = ?", [itemPK])
        for playlistPK in affected {
            let count = try db.fetchValue("SELECT count(*) FROM playlist_entries WHERE playlist_pk = ?", [playlistPK]).int ?? 0
            _ = try touch(db, playlistPK, count: count)
        }
    }
}
