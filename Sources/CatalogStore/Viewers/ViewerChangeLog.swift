import CatalogModels
import CatalogSchema
import Foundation

/// Each viewer's own change log (`viewer_changes`, Migrations/0013, written by triggers):
/// its progress, favorites and ratings as they change, behind `GET /v1/me/changes`. One
/// row per (viewer, kind, key), holding its latest change, in `seq` order, which is commit
/// order on both engines (SQLite's one writer and `AUTOINCREMENT`; on PostgreSQL the
/// catalog log's sequence and lock), so reading a viewer's rows from 0 is a snapshot of its
/// state. A reader reads only its own rows (``ChangeFilter/user``).
public struct ViewerChangeLog: ChangeSource {
    let database: any SQLDatabase

    public var commits: CommitSignal { database.commits }

    public func highWater() throws(StoreError) -> Int64 {
        try guarded { try database.read { db in try db.fetchValue("SELECT coalesce(max(seq), 0) FROM viewer_changes").int64 ?? 0 } }
    }

    public func check(_ token: ChangeToken, catalog: String, retention: Duration, now: Int64, filter: ChangeFilter) throws(StoreError) {
        guard token.catalog == catalog else { throw .syncTokenExpired("The token is not one of your own feed's; sync again from the start.") }
        guard token.issued <= now + 60_000 else { throw .syncTokenExpired("The token was not made by this server; sync again from the start.") }
        guard now - token.issued <= retention.components.seconds * 1000 else {
            throw .syncTokenExpired("The token is older than the change log's retention; sync again from the start.")
        }
        // Against the highest `seq` ever handed out: deleting an account's rows lowers the
        // log's highest row, never this.
        let top = try guarded { try database.read { db in try db.fetchValue(db.dialect.sequenceTop(of: "viewer_changes")).int64 ?? 0 } }
        guard token.seq <= top else { throw .syncTokenExpired("The token is ahead of your changes; sync again from the start.") }
    }

    public func touched(after seq: Int64, through top: Int64) throws(StoreError) -> Set<CatalogID>? {
        try guarded {
            try database.read { db in
                Set(try db.fetchColumn("SELECT DISTINCT user_id FROM viewer_changes WHERE seq > ? AND seq <= ?", [seq, top]).compactMap { $0.string.flatMap(CatalogID.init) })
            }
        }
    }

    public func read(after seq: Int64, filter: ChangeFilter, viewer: Viewer?, limit: Int, maxBytes: Int) throws(StoreError) -> ChangeBatch {
        guard let user = filter.user else { return ChangeBatch(after: seq, records: [], complete: true, highWater: seq) }
        let limit = max(1, min(limit, ChangeLog.maxReadLimit))
        return try guarded {
            try database.snapshot { db in
                if seq > 0, let purged = Int64(try db.fetchValue("SELECT value FROM catalog_metadata WHERE key = 'viewer_changes_purged_through'").string ?? ""),
                    seq < purged
                {
                    throw StoreError.syncTokenExpired("Deletions after this token were purged; sync again from the start.")
                }
                let rows = try db.fetchRows(
                    "SELECT seq, kind, key, deleted FROM viewer_changes WHERE user_id = ? AND seq > ? ORDER BY seq LIMIT ?", [user.rawValue, seq, limit + 1])
                let page = rows.prefix(limit).compactMap { row -> (seq: Int64, kind: ViewerStateKind, key: String, deleted: Bool)? in
                    guard let seq = row[0].int64, let kind = row[1].string.flatMap(ViewerStateKind.init(rawValue:)), let key = row[2].string else { return nil }
                    return (seq, kind, key, row[3].bool)
                }
                let state = try Self.state(db, user: user, keys: page.filter { !$0.deleted }.map { ($0.kind, $0.key) })
                let encoder = CatalogJSON.makeEncoder()
                var records: [ChangeRecord] = []
                var bytes = 0
                var complete = rows.count <= limit
                for change in page {
                    if bytes >= maxBytes && !records.isEmpty {
                        complete = false
                        break
                    }
                    // State removed since the row was read in this snapshot cannot be: skip what is missing.
                    guard let value = change.deleted ? Self.deletion(change.kind, change.key) : state[StateKey(kind: change.kind, key: change.key)] else {
                        continue
                    }
                    let json = Array(try encoder.encode(value))
                    bytes += json.count
                    records.append(
                        ChangeRecord(
                            seq: change.seq, type: change.kind.rawValue, id: change.key, version: 0, deleted: change.deleted, ownerID: nil, hidden: false,
                            shown: true, json: json))
                }
                // Commit order is `seq` order across the whole log: a reader who has seen all of
                // its own rows has seen everything up to the log's top.
                let top = complete ? try db.fetchValue("SELECT coalesce(max(seq), 0) FROM viewer_changes").int64 ?? 0 : records.last?.seq ?? seq
                return ChangeBatch(after: seq, records: records, complete: complete, highWater: top)
            }
        }
    }

    private struct StateKey: Hashable {
        let kind: ViewerStateKind
        let key: String
    }

    /// A removal, from its key alone.
    private static func deletion(_ kind: ViewerStateKind, _ key: String) -> ViewerChange? {
        switch kind {
        case .progress, .rating: CatalogID(key).map { ViewerChange(kind: kind, id: $0, deleted: true) }
        case .favorite: favorite(key).map { ViewerChange(kind: .favorite, id: $0.id, favoriteType: $0.type, deleted: true) }
        }
    }

    /// The favorite a key (`<type>:<id>`) names.
    private static func favorite(_ key: String) -> (type: FavoriteType, id: CatalogID)? {
        let parts = key.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let type = FavoriteType(rawValue: String(parts[0])), let id = CatalogID(String(parts[1])) else { return nil }
        return (type, id)
    }

    /// The state `keys` name, as `db` holds it now.
    private static func state(_ db: any SQLConnection, user: CatalogID, keys: [(ViewerStateKind, String)]) throws -> [StateKey: ViewerChange] {
        var found: [StateKey: ViewerChange] = [:]
        let items = keys.filter { $0.0 != .favorite }.map(\.1)
        if !items.isEmpty {
            let list = JSONArrayParameter.text(items, quoted: true)
            let progress = try db.fetchRows(
                "SELECT \(ProgressStore.columns) FROM viewer_progress WHERE user_id = ? AND \(db.dialect.isAmong("item_id"))",
                [user.rawValue, list])
            for value in progress.compactMap(ProgressStore.progress) {
                let id = ViewerSchema.item(of: value).id
                found[StateKey(kind: .progress, key: id.rawValue)] = ViewerChange(kind: .progress, id: id, deleted: false, progress: value)
            }
            let ratings = try db.fetchRows(
                "SELECT item_id, liked, rated_at FROM viewer_ratings WHERE user_id = ? AND \(db.dialect.isAmong("item_id"))",
                [user.rawValue, list])
            for row in ratings {
                guard let id = row[0].string.flatMap(CatalogID.init) else { continue }
                found[StateKey(kind: .rating, key: id.rawValue)] = ViewerChange(
                    kind: .rating, id: id, deleted: false, rating: ViewerSchema.rating(item: id, liked: row[1].bool, at: row[2].int64))
            }
        }
        let favorites = keys.filter { $0.0 == .favorite }.compactMap { favorite($0.1) }
        if !favorites.isEmpty {
            let rows = try db.fetchRows(
                """
                SELECT resource_type, resource_id, favorited_at FROM viewer_favorites WHERE user_id = ?
                AND \(db.dialect.isAmong("resource_id"))
                """, [user.rawValue, JSONArrayParameter.text(favorites.map(\.id.rawValue), quoted: true)])
            for row in rows {
                guard let type = row[0].string.flatMap(FavoriteType.init(rawValue:)), let id = row[1].string.flatMap(CatalogID.init), let at = row[2].int64
                else { continue }
                let favorite = Favorite(type: type, id: id, favoritedAt: Date(timeIntervalSince1970: Double(at) / 1000))
                found[StateKey(kind: .favorite, key: type.rawValue + ":" + id.rawValue)] = ViewerChange(
                    kind: .favorite, id: id, favoriteType: type, deleted: false, favorite: favorite)
            }
        }
        return found
    }

    /// Deletes the removals recorded before `cutoff`, noting the highest `seq` purged.
    public func purge(before cutoff: Int64, completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        ChangeLog.purge(database, table: "viewer_changes", marker: "viewer_changes_purged_through", before: cutoff, completion: completion)
    }
}
