import CatalogModels
import CatalogSchema
import Foundation

extension CatalogStore {
    /// How many resources one query of an export renders.
    private static let exportChunk = 500

    /// Everything the catalog holds about `user`, as NDJSON (`GET /v1/me/export`): one
    /// `{"data":…,"type":"…"}` line each (``AccountExportType``), read from one snapshot.
    /// Secrets never appear (API keys are kept only as digests). 404 when the user does not exist.
    public func export(user: CatalogID) throws(StoreError) -> [UInt8] {
        try guarded {
            try database.snapshot { db in
                var out: [UInt8] = []
                let encoder = CatalogJSON.makeEncoder()
                func line(_ type: AccountExportType, _ json: [UInt8]) {
                    out += Array("{\"data\":".utf8) + json + Array(",\"type\":\"\(type.rawValue)\"}\n".utf8)
                }
                func lines(_ type: AccountExportType, _ values: [some Encodable]) throws {
                    for value in values { line(type, Array(try encoder.encode(value))) }
                }
                /// The resources of `store` whose ids `sql` selects, rendered a chunk at a time, in id order.
                func resources(_ type: AccountExportType, _ sql: String, render: ([CatalogID]) throws -> [CatalogID: RenderedResource]) throws {
                    let ids = try db.fetchColumn(sql, [user.rawValue]).compactMap { $0.string.flatMap(CatalogID.init) }.sorted { $0.rawValue < $1.rawValue }
                    for start in stride(from: 0, to: ids.count, by: Self.exportChunk) {
                        let chunk = Array(ids[start..<min(ids.count, start + Self.exportChunk)])
                        let rendered = try render(chunk)
                        for id in chunk { if let resource = rendered[id] { line(type, resource.json) } }
                    }
                }
                guard let profile = try accounts.users.render(db, ids: [user])[user] else { throw StoreError.notFound }
                line(.user, profile.json)
                if let row = try db.fetchRow("SELECT issuer, subject FROM users WHERE id = ? AND issuer IS NOT NULL", [user.rawValue]),
                    let issuer = row[0].string, let subject = row[1].string
                {
                    try lines(.identity, [IdentityLink(issuer: issuer, subject: subject)])
                }
                try resources(.apiKey, "SELECT id FROM api_keys WHERE user_id = ?") { try accounts.keys.render(db, ids: $0) }
                try resources(.comment, "SELECT id FROM comments WHERE author_id = ?") { try comments.resources.render(db, ids: $0) }
                try resources(.playlist, "SELECT id FROM playlists WHERE owner_id = ?") { try playlists.render(db, ids: $0) }
                try resources(.playlistEntry, "SELECT e.id FROM playlist_entries e JOIN playlists p ON p.pk = e.playlist_pk WHERE p.owner_id = ?") {
                    try entries.changed(db, $0)
                }
                try lines(.progress, try progress.all(db, user: user))
                try lines(.favorite, try favorites.all(db, user: user))
                try lines(.rating, try ratings.all(db, user: user))
                let views = try db.fetchRows("SELECT item_id, counted_at FROM item_views WHERE user_id = ? ORDER BY item_id", [user.rawValue]).compactMap { row in
                    row[0].string.flatMap(CatalogID.init).map { ViewerSchema.countedView(item: $0, at: row[1].int64 ?? 0) }
                }
                try lines(.view, views)
                return out
            }
        }
    }
}
