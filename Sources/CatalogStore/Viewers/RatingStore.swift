import CatalogModels
import CatalogSchema
import Foundation

/// Each viewer's rating of each item (`viewer_ratings`, Migrations/0012): a row for a like
/// or a dislike, none for no rating. Every like given or taken back (by the viewer, or by
/// deleting the account or the item) adds a delta to the item's count of likes, which
/// ``ViewCounter`` applies: rating never waits on the item's row.
public final class RatingStore: Sendable {
    private let database: any SQLDatabase

    init(database: any SQLDatabase) {
        self.database = database
    }

    /// Sets `user`'s rating of `item` (`none` takes it back); 404 when the item does not exist.
    public func rate(
        _ rating: Rating, user: CatalogID, item: CatalogID, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<ItemRating, any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        database.submit(
            options, atomic: true,
            { db in
                guard try db.exists("SELECT 1 FROM playable_items WHERE id = ?", [item.rawValue]) else { throw StoreError.notFound }
                switch rating {
                case .none:
                    try db.execute("DELETE FROM viewer_ratings WHERE user_id = ? AND item_id = ?", [user.rawValue, item.rawValue])
                    return ViewerSchema.rating(item: item, liked: nil, at: nil)
                case .like, .dislike:
                    // The same rating again keeps its time (and adds no delta).
                    try db.execute(
                        """
                        INSERT INTO viewer_ratings (user_id, item_id, liked, rated_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT (user_id, item_id) DO UPDATE SET liked = excluded.liked, rated_at = excluded.rated_at
                        WHERE viewer_ratings.liked <> excluded.liked
                        """, [user.rawValue, item.rawValue, rating == .like ? 1 : 0, now])
                    return try self.rating(db, user: user, item: item)
                }
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    /// `user`'s rating of `item` (`none` when it has not rated it); 404 when the item does not exist.
    public func rating(user: CatalogID, item: CatalogID) throws(StoreError) -> ItemRating {
        try guarded {
            try database.read { db in
                guard try db.exists("SELECT 1 FROM playable_items WHERE id = ?", [item.rawValue]) else { throw StoreError.notFound }
                return try rating(db, user: user, item: item)
            }
        }
    }

    /// All of `user`'s ratings, as `db` reads them (for its export), by item.
    func all(_ db: any SQLConnection, user: CatalogID) throws -> [ItemRating] {
        try db.fetchRows("SELECT item_id, liked, rated_at FROM viewer_ratings WHERE user_id = ? ORDER BY item_id", [user.rawValue]).compactMap { row in
            row[0].string.flatMap(CatalogID.init).map { ViewerSchema.rating(item: $0, liked: row[1].bool, at: row[2].int64) }
        }
    }

    /// `user`'s rating of `item` as `db` reads it.
    func rating(_ db: any SQLConnection, user: CatalogID, item: CatalogID) throws -> ItemRating {
        let row = try db.fetchRow("SELECT liked, rated_at FROM viewer_ratings WHERE user_id = ? AND item_id = ?", [user.rawValue, item.rawValue])
        return ViewerSchema.rating(item: item, liked: row.map { $0[0].bool }, at: row?[1].int64)
    }
}
