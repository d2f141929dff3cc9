import CatalogModels
import CatalogSchema
import Foundation
import Synchronization

/// Who a view is counted for: a signed-in viewer, or an anonymous playback session (by a
/// digest of its id, with a digest of its client's address, which bounds how many sessions
/// one address counts).
public enum ViewerKey: Sendable, Hashable {
    /// A signed-in viewer: one view a day whatever the session.
    case user(CatalogID)
    /// An anonymous session.
    case session(digest: String, address: String)
}

/// Views of items (`item_views`, Migrations/0012) and every viewer's likes and views added
/// up into each item's counts (``ResourceSchema/counted``).
///
/// A counted view or a like appends a delta row (the tables' triggers); ``apply()`` takes
/// the waiting deltas in batches, each in a transaction of its own (on PostgreSQL in one
/// statement, taking rows no other server holds, so every delta is added exactly once
/// however many servers run), and adds each item's sum to its row in one update: a popular
/// item's viewers never wait on its row, and the writer updates it once a batch, not once
/// a viewer.
public final class ViewCounter: Sendable {
    private let database: any SQLDatabase
    private let items: ResourceStore
    /// The key of the digests of anonymous sessions and their addresses (`view_secret`,
    /// made once per catalog by Migrations/0014), read on first use.
    private let key = Mutex<[UInt8]?>(nil)
    /// The most delta rows one transaction of ``apply()`` takes.
    static let batchSize = 5_000

    init(database: any SQLDatabase, items: ResourceStore) {
        self.database = database
        self.items = items
    }

    /// The key of the digests of anonymous sessions and their addresses: a digest cannot be
    /// reversed without it.
    package func digestKey() throws(StoreError) -> [UInt8] {
        if let known = key.withLock({ $0 }) { return known }
        let secret = try guarded { try database.read { db in try db.fetchValue("SELECT value FROM catalog_metadata WHERE key = 'view_secret'").string } }
        guard let secret else { throw StoreError.unavailable("The catalog has no view secret.") }
        let bytes = Array(secret.utf8)
        key.withLock { $0 = bytes }
        return bytes
    }

    /// Whether a report of `view` of `item` by `viewer` may count a view (a read, no write:
    /// most reports are of views counted already, or not played long enough yet); 404
    /// when the item does not exist.
    public func mayCount(_ view: ViewInput, item: CatalogID, viewer: ViewerKey) throws(StoreError) -> Bool {
        let since = Timestamp.milliseconds(Date()) - Int64(ViewRules.window * 1000)
        return try guarded {
            try database.read { db in
                guard let row = try db.fetchRow("SELECT duration_seconds FROM playable_items WHERE id = ?", [item.rawValue]) else {
                    throw StoreError.notFound
                }
                guard ViewerSchema.hasPlayedEnough(view, itemDuration: row[0].double) else { return false }
                return try !db.exists("SELECT 1 FROM item_views WHERE item_id = ? AND viewer = ? AND counted_at > ?", [item.rawValue, viewer.key, since])
            }
        }
    }

    /// Counts a view of `item` by `viewer` when ``ViewRules`` say it counts (played long
    /// enough, not counted for this viewer in the last day, and for an anonymous session,
    /// not too many sessions of its address); 404 when the item does not exist.
    public func count(
        _ view: ViewInput, item: CatalogID, viewer: ViewerKey, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<ViewAnswer, any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        let since = now - Int64(ViewRules.window * 1000)
        database.submit(
            options, atomic: true,
            { db in
                guard let row = try db.fetchRow("SELECT duration_seconds FROM playable_items WHERE id = ?", [item.rawValue]) else {
                    throw StoreError.notFound
                }
                guard ViewerSchema.hasPlayedEnough(view, itemDuration: row[0].double) else { return ViewAnswer(counted: false) }
                var user: String?
                var address: String?
                switch viewer {
                case let .user(id): user = id.rawValue
                case let .session(_, from):
                    address = from
                    let sessions =
                        try db.fetchValue(
                            "SELECT count(*) FROM item_views WHERE item_id = ? AND address = ? AND counted_at > ?", [item.rawValue, from, since]
                        ).int ?? 0
                    if sessions >= ViewRules.sessionsPerAddress { return ViewAnswer(counted: false) }
                }
                // Inserted, or counted again when the last count is a day old: one statement, so
                // two reports of one viewer at once count once.
                let written = try db.execute(
                    """
                    INSERT INTO item_views (item_id, viewer, user_id, address, counted_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (item_id, viewer) DO UPDATE SET counted_at = excluded.counted_at WHERE item_views.counted_at <= ?
                    """, [item.rawValue, viewer.key, user, address, now, since])
                return ViewAnswer(counted: written > 0)
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    /// Adds the waiting deltas to their items' counts, a batch a transaction of its own,
    /// until none waits (at most `batches` batches), then forgets views older than a day;
    /// blocking.
    /// - Returns: the items whose counts changed.
    @discardableResult
    public func apply(batches: Int = 10) throws(StoreError) -> Set<CatalogID> {
        var changed = Set<CatalogID>()
        try guarded {
            for _ in 0..<batches {
                let (ids, full) = try database.write(atomic: true, heavy: true) { db in
                    db.dialect.mayBeShared ? try Self.applyShared(db) : try Self.applyOne(db)
                }
                for id in ids { items.rendering.cache?.invalidate(id: id) }
                changed.formUnion(ids.compactMap(CatalogID.init))
                if !full { break }
            }
            let expired = Timestamp.milliseconds(Date()) - Int64(ViewRules.window * 1000)
            for _ in 0..<batches {
                let removed = try database.write(heavy: true) { db in
                    try db.execute(
                        "DELETE FROM item_views WHERE (item_id, viewer) IN (SELECT item_id, viewer FROM item_views WHERE counted_at <= ? LIMIT ?)",
                        [expired, Self.batchSize])
                }
                if removed < Self.batchSize { break }
            }
        }
        return changed
    }

    /// One batch where several servers share the database (PostgreSQL): one statement takes
    /// the oldest waiting deltas no other server holds and adds each item's sum to it, so
    /// the batch holds the writers' lock for one round trip.
    private static func applyShared(_ db: any SQLConnection) throws -> (ids: [String], full: Bool) {
        let rows = try db.fetchRows(
            """
            WITH taken AS (
                DELETE FROM item_count_deltas WHERE seq IN
                    (SELECT seq FROM item_count_deltas ORDER BY seq LIMIT ?\(db.dialect.forDeleteSkippingLocked))
                RETURNING item_id, likes, views),
            sums AS (SELECT item_id, sum(likes) AS likes, sum(views) AS views FROM taken GROUP BY item_id),
            updated AS (
                UPDATE playable_items p SET like_count = \(db.dialect.greatest)(0, p.like_count + s.likes), view_count = p.view_count + s.views
                FROM sums s WHERE p.id = s.item_id AND (s.likes <> 0 OR s.views <> 0) RETURNING p.id)
            SELECT (SELECT count(*) FROM taken), u.id FROM (SELECT 1) one LEFT JOIN updated u ON TRUE
            """, [batchSize])
        // One row at least: how many deltas were taken (a bigint), and each updated item.
        return (rows.compactMap { $0[1].string }, rows.first?[0].int64 == Int64(batchSize))
    }

    /// One batch where this server holds the database alone (SQLite, whose one writer
    /// makes each statement a local call).
    private static func applyOne(_ db: any SQLConnection) throws -> (ids: [String], full: Bool) {
        let rows = try db.fetchRows(
            """
            DELETE FROM item_count_deltas WHERE seq IN (SELECT seq FROM item_count_deltas ORDER BY seq LIMIT ?)
            RETURNING item_id, likes, views
            """, [batchSize])
        var sums: [String: (likes: Int64, views: Int64)] = [:]
        for row in rows {
            guard let item = row[0].string else { continue }
            sums[item, default: (0, 0)].likes += row[1].int64 ?? 0
            sums[item, default: (0, 0)].views += row[2].int64 ?? 0
        }
        let ids = sums.keys.sorted().filter { sums[$0].map { $0.likes != 0 || $0.views != 0 } ?? false }
        for id in ids {
            guard let sum = sums[id] else { continue }
            try db.execute(
                "UPDATE playable_items SET like_count = max(0, like_count + ?), view_count = view_count + ? WHERE id = ?", [sum.likes, sum.views, id])
        }
        return (ids, rows.count == batchSize)
    }
}

extension ViewerKey {
    /// The `viewer` column of its rows.
    var key: String {
        switch self {
        case let .user(id): "user:" + id.rawValue
        case let .session(digest, _): "session:" + digest
        }
    }
}
