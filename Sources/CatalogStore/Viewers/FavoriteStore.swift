import CatalogModels
import CatalogSchema
import Foundation

/// Each viewer's favorite items, games and playlists (`viewer_favorites`,
/// Migrations/0012): at most ``FavoriteRules/maxPerViewer`` a viewer, gone with the viewer
/// or the resource (triggers), and listed only as the viewer may see each resource (a
/// playlist made private since is left out, not shown). Only the viewer reads its own.
public final class FavoriteStore: Sendable {
    private let database: any SQLDatabase
    private let resources: [FavoriteType: ResourceStore]

    init(database: any SQLDatabase, resources: [FavoriteType: ResourceStore]) {
        self.database = database
        self.resources = resources
    }

    /// Makes the resource `id` of `type` one of `user`'s favorites (seen as `viewer` sees
    /// it: 404 when it does not exist or is hidden from the viewer).
    /// - Returns: whether it was not a favorite before.
    public func add(
        _ type: FavoriteType, _ id: CatalogID, user: CatalogID, viewer: Viewer, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void
    ) {
        guard let store = resources[type] else { return completion(.failure(StoreError.notFound)) }
        let now = Timestamp.milliseconds(Date())
        database.submit(
            options, atomic: true,
            { db in
                guard try store.isVisible(db, id, viewer: viewer) else { throw StoreError.notFound }
                // One viewer's favorites are counted one write after another (the user's row locked first).
                _ = try db.exists("SELECT 1 FROM users WHERE id = ?" + db.dialect.forUpdate, [user.rawValue])
                let key: SQLArguments = [user.rawValue, type.rawValue, id.rawValue]
                if try db.exists("SELECT 1 FROM viewer_favorites WHERE user_id = ? AND resource_type = ? AND resource_id = ?", key) { return false }
                let count = try db.fetchValue("SELECT count(*) FROM viewer_favorites WHERE user_id = ?", [user.rawValue]).int ?? 0
                guard count < FavoriteRules.maxPerViewer else {
                    throw StoreError.quotaExceeded("You have \(FavoriteRules.maxPerViewer) favorites, as many as one viewer keeps; remove one first.")
                }
                try db.execute("INSERT INTO viewer_favorites (user_id, resource_type, resource_id, favorited_at) VALUES (?, ?, ?, ?)", key + [now])
                return true
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    /// Removes the resource `id` of `type` from `user`'s favorites.
    /// - Returns: whether it was one.
    public func remove(
        _ type: FavoriteType, _ id: CatalogID, user: CatalogID, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void
    ) {
        database.submit(
            options, atomic: false,
            { db in
                try db.execute(
                    "DELETE FROM viewer_favorites WHERE user_id = ? AND resource_type = ? AND resource_id = ?", [user.rawValue, type.rawValue, id.rawValue]) > 0
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    /// A page of `user`'s favorites (of `type` only, when given), the most recent first,
    /// each with its resource as `viewer` may see it, as `{"items":[…],"nextCursor":"…"}`.
    public func page(user: CatalogID, type: FavoriteType?, viewer: Viewer, limit: Int, cursor: String?) throws(StoreError) -> [UInt8] {
        let fingerprint = "favorites" + (type.map { "|" + $0.rawValue } ?? "")
        var after: (favorited: Int64, type: String, id: String)?
        if let cursor {
            let decoded = try ListCursor(decoding: cursor, fingerprint: fingerprint)
            let parts = decoded.id.split(separator: "/", maxSplits: 1).map(String.init)
            guard case let .integer(favorited) = decoded.key, parts.count == 2 else { throw .invalidCursor("The cursor is malformed.") }
            after = (favorited, parts[0], parts[1])
        }
        return try guarded {
            try database.snapshot { db in
                var sql = "SELECT resource_type, resource_id, favorited_at FROM viewer_favorites WHERE user_id = ?"
                var arguments: SQLArguments = [user.rawValue]
                if let type {
                    sql += " AND resource_type = ?"
                    arguments.append(type.rawValue)
                }
                if let after {
                    sql += " AND (favorited_at < ? OR (favorited_at = ? AND (resource_type < ? OR (resource_type = ? AND resource_id < ?))))"
                    arguments += [after.favorited, after.favorited, after.type, after.type, after.id]
                }
                sql += " ORDER BY favorited_at DESC, resource_type DESC, resource_id DESC LIMIT ?"
                arguments.append(limit + 1)
                let rows = try db.fetchRows(sql, arguments).compactMap { row -> (type: FavoriteType, id: CatalogID, at: Int64)? in
                    guard let type = row[0].string.flatMap(FavoriteType.init(rawValue:)), let id = row[1].string.flatMap(CatalogID.init),
                        let at = row[2].int64
                    else { return nil }
                    return (type, id, at)
                }
                let page = rows.prefix(limit)
                var rendered: [FavoriteType: [CatalogID: RenderedResource]] = [:]
                for (type, store) in resources {
                    let ids = page.filter { $0.type == type }.map(\.id)
                    if !ids.isEmpty { rendered[type] = try store.render(db, ids: ids, viewer: viewer) }
                }
                var writer = JSONWriter(capacity: 1024 + page.count * 512)
                writer.raw("{\"items\":[")
                var first = true
                for favorite in page {
                    // Hidden from the viewer since it was made a favorite: left out, kept.
                    guard let resource = rendered[favorite.type]?[favorite.id] else { continue }
                    if !first { writer.byte(UInt8(ascii: ",")) }
                    first = false
                    // Members in sorted order, as the model encodes them: the resource's
                    // key ("game", "playableItem", "playlist") before or after "id".
                    let member = [UInt8(ascii: ",")] + RenderedField.key(favorite.type.rawValue) + resource.json
                    let memberFirst = favorite.type.rawValue < "id"
                    writer.raw("{\"favoritedAt\":")
                    writer.timestamp(milliseconds: favorite.at)
                    if memberFirst { writer.raw(member) }
                    writer.raw(",\"id\":")
                    writer.string(favorite.id.rawValue)
                    if !memberFirst { writer.raw(member) }
                    writer.raw(",\"type\":")
                    writer.string(favorite.type.rawValue)
                    writer.byte(UInt8(ascii: "}"))
                }
                writer.raw("]")
                if rows.count > limit, let last = page.last {
                    let next = ListCursor(fingerprint: fingerprint, key: .integer(last.at), id: last.type.rawValue + "/" + last.id.rawValue)
                    writer.raw(",\"nextCursor\":")
                    writer.string(next.encoded())
                }
                writer.byte(UInt8(ascii: "}"))
                return writer.bytes
            }
        }
    }

    /// All of `user`'s favorites, without their resources, as `db` reads them (for its
    /// export), most recent first.
    func all(_ db: any SQLConnection, user: CatalogID) throws -> [Favorite] {
        try db.fetchRows(
            "SELECT resource_type, resource_id, favorited_at FROM viewer_favorites WHERE user_id = ? ORDER BY favorited_at DESC, resource_type, resource_id",
            [user.rawValue]
        ).compactMap { row in
            guard let type = row[0].string.flatMap(FavoriteType.init(rawValue:)), let id = row[1].string.flatMap(CatalogID.init), let at = row[2].int64
            else { return nil }
            return Favorite(type: type, id: id, favoritedAt: Date(timeIntervalSince1970: Double(at) / 1000))
        }
    }

    /// Whether the resource `id` of `type` is one of `user`'s favorites, as `db` reads it.
    func isFavorite(_ db: any SQLConnection, _ type: FavoriteType, _ id: CatalogID, user: CatalogID) throws -> Bool {
        try db.exists("SELECT 1 FROM viewer_favorites WHERE user_id = ? AND resource_type = ? AND resource_id = ?", [user.rawValue, type.rawValue, id.rawValue])
    }
}
