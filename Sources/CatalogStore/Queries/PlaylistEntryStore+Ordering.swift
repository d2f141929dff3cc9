/// Where an entry goes among its playlist's entries: the order key a write gives it
/// (``EntryOrder`` does the arithmetic), and the keys a rebalancing or a new order rewrites.
extension PlaylistEntryStore {
    /// The key for an entry at `position` among the playlist's `others` entries (all but
    /// `moving`, the entry a move takes, whose key stays when it already lies there):
    /// halfway between its neighbours', or, when they have no room, made by giving some
    /// of them new keys (``EntryOrder/spread(_:at:)``).
    static func key(
        _ db: any SQLConnection, playlistPK: Int64, others: Int, at position: Int,
        moving: (pk: Int64, key: Int64)?
    ) throws -> Int64 {
        let excluded = moving?.pk ?? 0
        // The neighbours, found from the nearer end (an append reads one key).
        let descending = position > others / 2
        let offset = descending ? max(others - 1 - position, 0) : max(position - 1, 0)
        let limit = (descending ? position == others : position == 0) ? 1 : 2
        let found = try db.fetchColumn(
            """
            SELECT sort_key FROM playlist_entries WHERE playlist_pk = ? AND pk != ? ORDER BY sort_key\(descending ? " DESC" : "") LIMIT ? OFFSET ?
            """, [playlistPK, excluded, limit, offset]
        ).compactMap(\.int64)
        func at(_ index: Int) -> Int64? { found.indices.contains(index) ? found[index] : nil }
        let (before, after) = descending ? (position == others ? (at(0), nil) : (at(1), at(0))) : (position == 0 ? (nil, at(0)) : (at(0), at(1)))
        if let moving, before.map({ $0 < moving.key }) ?? true, after.map({ moving.key < $0 }) ?? true { return moving.key }
        if let key = EntryOrder.key(between: before, and: after) { return key }
        let rows = try db.fetchRows("SELECT pk, sort_key FROM playlist_entries WHERE playlist_pk = ? AND pk != ? ORDER BY sort_key", [playlistPK, excluded])
        let (changed, key) = EntryOrder.spread(rows.map { $0[1].int64 ?? 0 }, at: min(position, rows.count))
        try rekey(db, changed.map { (rows[$0.index][0].int64 ?? 0, $0.key) })
        return key
    }

    /// Gives the entries `keys` names (their pks) their new keys, in one statement.
    static func rekey(_ db: any SQLConnection, _ keys: [(pk: Int64, key: Int64)]) throws {
        guard !keys.isEmpty else { return }
        let dialect = db.dialect
        try db.execute(
            """
            UPDATE playlist_entries SET sort_key = CAST(\(dialect.jsonElement("m.value", 1)) AS BIGINT), version = version + 1
            FROM \(dialect.jsonElements("m")) WHERE playlist_entries.pk = CAST(\(dialect.jsonElement("m.value", 0)) AS BIGINT)
            """, [JSONArrayParameter.text(keys.lazy.map { "[\($0.pk),\($0.key)]" })])
    }
}
