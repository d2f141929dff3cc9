import CatalogModels
import CatalogSchema
import Foundation

/// Each viewer's progress in each playable item (`viewer_progress`, Migrations/0011): one
/// row per (user, item), written by ``ProgressRules`` inside the write, so two devices'
/// heartbeats arriving together are decided one after the other, the same way a device
/// decides them offline. Only the viewer reads its own rows: nothing here takes another
/// user's id from a client.
public final class ProgressStore: Sendable {
    private let database: any SQLDatabase
    private let items: ResourceStore

    init(database: any SQLDatabase, items: ResourceStore) {
        self.database = database
        self.items = items
    }

    static let columns = "position_seconds, duration_seconds, played, play_count, watched_at, device_id, version, item_id"

    /// Applies `heartbeat` from `user`'s device to its progress in `item`, received now
    /// (``ProgressRules/apply(_:receivedAt:to:item:itemDuration:)``); 404 when the item does
    /// not exist.
    public func record(
        _ heartbeat: ProgressInput, user: CatalogID, item: CatalogID, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<ProgressAnswer, any Error>) -> Void
    ) {
        let received = Date()
        database.submit(
            options, atomic: true,
            { db in
                guard let row = try db.fetchRow("SELECT duration_seconds FROM playable_items WHERE id = ?", [item.rawValue]) else {
                    throw StoreError.notFound
                }
                // One user's heartbeats are decided one after another (PostgreSQL's writers run
                // side by side): the user's row is locked before its progress is read.
                _ = try db.exists("SELECT 1 FROM users WHERE id = ?" + db.dialect.forUpdate, [user.rawValue])
                let stored = try db.fetchRow(
                    "SELECT \(Self.columns) FROM viewer_progress WHERE user_id = ? AND item_id = ?" + db.dialect.forUpdate, [user.rawValue, item.rawValue]
                ).flatMap(Self.progress)
                let (progress, applied) = ProgressRules.apply(heartbeat, receivedAt: received, to: stored, item: item, itemDuration: row[0].double)
                if progress != stored {
                    try db.execute(
                        """
                        INSERT INTO viewer_progress (user_id, item_id, position_seconds, duration_seconds, played, play_count, watched_at, device_id, begun, version)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT (user_id, item_id) DO UPDATE SET position_seconds = excluded.position_seconds,
                            duration_seconds = excluded.duration_seconds, played = excluded.played, play_count = excluded.play_count,
                            watched_at = excluded.watched_at, device_id = excluded.device_id, begun = excluded.begun, version = excluded.version
                        """,
                        [
                            user.rawValue, item.rawValue, progress.positionSeconds, ViewerSchema.item(of: progress).duration, progress.played ? 1 : 0,
                            progress.playCount,
                            Timestamp.milliseconds(progress.watchedAt), progress.deviceId, ProgressRules.isBegun(progress) ? 1 : 0, progress.version,
                        ])
                }
                return ProgressAnswer(applied: applied, progress: progress)
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    /// `user`'s progress in `item`, or `nil` when it has none.
    public func progress(user: CatalogID, item: CatalogID) throws(StoreError) -> PlaybackProgress? {
        try guarded { try database.read { db in try progress(db, user: user, item: item) } }
    }

    /// `user`'s progress in `item` as `db` reads it.
    func progress(_ db: any SQLConnection, user: CatalogID, item: CatalogID) throws -> PlaybackProgress? {
        try db.fetchRow("SELECT \(Self.columns) FROM viewer_progress WHERE user_id = ? AND item_id = ?", [user.rawValue, item.rawValue])
            .flatMap(Self.progress)
    }

    /// All of `user`'s progress, as `db` reads it (for its export), by item.
    func all(_ db: any SQLConnection, user: CatalogID) throws -> [PlaybackProgress] {
        try db.fetchRows("SELECT \(Self.columns) FROM viewer_progress WHERE user_id = ? ORDER BY item_id", [user.rawValue]).compactMap(Self.progress)
    }

    /// Forgets `user`'s progress in `item` (its play count too): it leaves "Continue watching".
    public func forget(user: CatalogID, item: CatalogID, options: WriteOptions = WriteOptions(), completion: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        database.submit(
            options, atomic: false,
            { db in
                let existed = try db.exists("SELECT 1 FROM viewer_progress WHERE user_id = ? AND item_id = ?", [user.rawValue, item.rawValue])
                try db.execute("DELETE FROM viewer_progress WHERE user_id = ? AND item_id = ?", [user.rawValue, item.rawValue])
                return existed
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    /// A page of `user`'s "Continue watching": items begun and not finished, the most
    /// recently watched first, each with its item, as `{"items":[…],"nextCursor":"…"}`.
    /// One index range of the viewer's rows, then the page's items in one query, from one snapshot.
    public func continueWatching(user: CatalogID, limit: Int, cursor: String?) throws(StoreError) -> [UInt8] {
        let fingerprint = "continue-watching"
        var after: (watched: Int64, item: String)?
        if let cursor {
            let decoded = try ListCursor(decoding: cursor, fingerprint: fingerprint)
            guard case let .integer(watched) = decoded.key else { throw .invalidCursor("The cursor is malformed.") }
            after = (watched, decoded.id)
        }
        return try guarded {
            try database.snapshot { db in
                var sql = "SELECT \(Self.columns) FROM viewer_progress WHERE user_id = ? AND begun = 1"
                var arguments: SQLArguments = [user.rawValue]
                if let after {
                    sql += " AND (watched_at < ? OR (watched_at = ? AND item_id < ?))"
                    arguments += [after.watched, after.watched, after.item]
                }
                sql += " ORDER BY watched_at DESC, item_id DESC LIMIT ?"
                arguments.append(limit + 1)
                let rows = try db.fetchRows(sql, arguments)
                let page = rows.prefix(limit).compactMap(Self.progress)
                let rendered = try items.render(db, ids: page.map { ViewerSchema.item(of: $0).id })
                let encoder = CatalogJSON.makeEncoder()
                var json = Array("{\"items\":[".utf8)
                var first = true
                for progress in page {
                    // An item deleted since takes its row with it; one racing the read is skipped.
                    guard let item = rendered[ViewerSchema.item(of: progress).id] else { continue }
                    if !first { json.append(UInt8(ascii: ",")) }
                    first = false
                    json += Array("{\"playableItem\":".utf8) + item.json + Array(",\"progress\":".utf8)
                    json += try encoder.encode(progress) + [UInt8(ascii: "}")]
                }
                json += Array("]".utf8)
                if rows.count > limit, let last = page.last {
                    let next = ListCursor(
                        fingerprint: fingerprint, key: .integer(Timestamp.milliseconds(last.watchedAt)), id: ViewerSchema.item(of: last).id.rawValue)
                    json += Array(",\"nextCursor\":\"\(next.encoded())\"".utf8)
                }
                return json + [UInt8(ascii: "}")]
            }
        }
    }

    /// The progress a row of ``columns`` holds.
    static func progress(_ row: SQLRow) -> PlaybackProgress? {
        guard let position = row[0].double, let count = row[3].int, let watched = row[4].int64, let device = row[5].string, let version = row[6].int,
            let item = row[7].string.flatMap(CatalogID.init)
        else { return nil }
        return ViewerSchema.progress(
            item: item, position: position, duration: row[1].double, played: row[2].bool, playCount: count,
            watchedAt: Date(timeIntervalSince1970: Double(watched) / 1000), device: device, version: version)
    }
}
