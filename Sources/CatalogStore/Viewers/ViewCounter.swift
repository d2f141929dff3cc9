import CatalogModels
import CatalogSchema
import Foundation

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
/// the waiting deltas in batches (on PostgreSQL each server takes rows no other holds, so
/// every delta is added exactly once however many servers run) and adds each item's sum
/// to its row in one update: a popular item's viewers never wait on its row, and the
/// writer updates it once a batch, not once a viewer.
public final class ViewCounter: Sendable {
    private let database: any SQLDatabase
    private let items: ResourceStore
    /// The most delta rows one transaction of ``apply()`` takes.
    static let batchSize = 10_000

    init(database: any SQLDatabase, items: ResourceStore) {
        self.database = database
        self.items = items
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
                guard ViewerSchema.hasPlayedEnough(view, itemDuration: row[0].double) else {
                    return ViewAnswer(counted: false)
                }
                let key: String
                let user: String?
                let address: String?
                switch viewer {
                case let .user(id):
                    (key, user, address) = ("user:" + id.rawValue, id.rawValue, nil)
                case let .session(digest, from):
                    (key, user, address) = ("session:" + digest, nil, from)
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
                    """, [item.rawValue, key, user, address, now, since])
                return ViewAnswer(counted: written > 0)
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    /// Adds the waiting deltas to their items' counts, a batch a transaction, until none
    /// waits (at most `batches` batches), then forgets views older than a day; blocking.
    /// - Returns: the items whose counts changed.
    @discardableResult
    public func apply(batches: Int = 10) throws(StoreError) -> Set<CatalogID> {
        var changed = Set<CatalogID>()
        try guarded {
            for _ in 0..<batches {
                let (ids, full) = try database.write(atomic: true) { db -> ([String], Bool) in
                    let rows = try db.fetchRows(
                        """
                        DELETE FROM item_count_deltas WHERE seq IN
                            (SELECT seq FROM item_count_deltas ORDER BY seq LIMIT ?\(db.dialect.forDeleteSkippingLocked))
                        RETURNING item_id, likes, views
                        """, [Self.batchSize])
                    var sums: [String: (likes: Int64, views: Int64)] = [:]
                    for row in rows {
                        guard let item = row[0].string else { continue }
                        sums[item, default: (0, 0)].likes += row[1].int64 ?? 0
                        sums[item, default: (0, 0)].views += row[2].int64 ?? 0
                    }
                    // In id order, so two servers applying batches at once lock rows in one order.
                    let ids = sums.keys.sorted().filter { sums[$0].map { $0.likes != 0 || $0.views != 0 } ?? false }
                    for id in ids {
                        guard let sum = sums[id] else { continue }
                        try db.execute(
                            "UPDATE playable_items SET like_count = \(db.dialect.greatest)(0, like_count + ?), view_count = view_count + ? WHERE id = ?",
                            [sum.likes, sum.views, id])
                    }
                    return (ids, rows.count == Self.batchSize)
                }
                for id in ids { items.rendering.cache?.invalidate(id: id) }
                changed.formUnion(ids.compactMap(CatalogID.init))
                if !full { break }
            }
            let expired = Timestamp.milliseconds(Date()) - Int64(ViewRules.window * 1000)
            _ = try database.write { db in
                try db.execute(
                    "DELETE FROM item_views WHERE (item_id, viewer) IN (SELECT item_id, viewer FROM item_views WHERE counted_at <= ? LIMIT ?)",
                    [expired, Self.batchSize])
            }
        }
        return changed
    }
}
