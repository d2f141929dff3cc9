import CatalogModels
import Foundation

extension PlaylistEntryStore {
    /// How many (finished item, entry) pairs one "Up next" reads at most: its cost does not
    /// grow with how much the viewer has watched.
    static let upNextScan = 5_000

    /// `user`'s "Up next", as `{"items":[…]}`: for each playlist it is going through (its
    /// own, and those it made favorites, as `viewer` may see them), the entry after the one
    /// it finished most recently, the most recently watched playlist first; playlists it
    /// finished to the end are left out. At most `limit` entries.
    public func upNext(user: CatalogID, viewer: Viewer, limit: Int) throws(StoreError) -> [UInt8] {
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                var sql = """
                    SELECT t.pk, t.id, e.id, e.sort_key, p.watched_at FROM viewer_progress p
                    JOIN playable_items i ON i.id = p.item_id
                    JOIN playlist_entries e ON e.item_pk = i.pk
                    JOIN playlists t ON t.pk = e.playlist_pk
                    WHERE p.user_id = ? AND p.play_count > 0
                      AND (t.owner_id = ? OR t.id IN (SELECT resource_id FROM viewer_favorites WHERE user_id = ? AND resource_type = 'playlist'))
                    """
                var arguments: SQLArguments = [user.rawValue, user.rawValue, user.rawValue]
                if case let .user(reader) = viewer, let filter = playlists.visibleFilter, let hidden = playlists.schema.ownership?.hiddenWhen {
                    sql += " AND " + filter
                    arguments += [hidden.value, reader?.rawValue ?? ""]
                }
                sql += " ORDER BY p.watched_at DESC, e.sort_key DESC LIMIT ?"
                arguments.append(Self.upNextScan)
                var seen = Set<Int64>()
                var found: [(playlist: CatalogID, after: String, next: RenderedEntry, watched: Int64)] = []
                for row in try db.fetchRows(sql, arguments) {
                    guard found.count < limit, let pk = row[0].int64, seen.insert(pk).inserted, let playlist = row[1].string.flatMap(CatalogID.init),
                        let after = row[2].string, let key = row[3].int64, let watched = row[4].int64
                    else { continue }
                    let next = try renderEntry(
                        db.query(selectSQL + " WHERE e.playlist_pk = ? AND e.sort_key > ? ORDER BY e.sort_key LIMIT 1", [pk, key]), version: 0, fields: .all,
                        epoch: epoch)
                    if let next { found.append((playlist, after, next, watched)) }
                }
                let rendered = try playlists.render(db, ids: found.map(\.playlist), viewer: viewer)
                var writer = JSONWriter(capacity: 1024 + found.count * 1024)
                writer.raw("{\"items\":[")
                var first = true
                for entry in found {
                    guard let playlist = rendered[entry.playlist] else { continue }
                    if !first { writer.byte(UInt8(ascii: ",")) }
                    first = false
                    writer.raw("{\"after\":")
                    writer.string(entry.after)
                    writer.raw(",\"next\":")
                    writer.raw(entry.next.json)
                    writer.raw(",\"playlist\":")
                    writer.raw(playlist.json)
                    writer.raw(",\"watchedAt\":")
                    writer.timestamp(milliseconds: entry.watched)
                    writer.byte(UInt8(ascii: "}"))
                }
                writer.raw("]}")
                return writer.bytes
            }
        }
    }
}
