import CatalogModels
import CatalogSchema
import Foundation

/// An upload of an image's original, as its record keeps it.
package struct ImageUpload: Sendable {
    package let byteSize: Int
    /// Who uploaded it; `nil` for the server's own (the demo catalog).
    package let uploader: CatalogID?
    /// The most bytes the uploader's images may hold, when limited (members').
    package let quota: Int?

    package init(byteSize: Int, uploader: CatalogID?, quota: Int?) {
        self.byteSize = byteSize
        self.uploader = uploader
        self.quota = quota
    }
}

/// What the database knows of stored images (`images`, Migrations/0010): each original
/// kept, by its SHA-256, with who uploaded it (their quota) and when it was last uploaded
/// or last stopped being shown (`touched_at`); and which resources show an image (their
/// `image_url`). The bytes are the media store's.
///
/// Removing an image takes two writes around the removal of its bytes: ``claim(_:before:)``
/// marks its row (`touched_at` = ``removing``) while nothing shows it and it is old enough,
/// the bytes go, and ``drop(_:)`` deletes the row. While marked, an upload of the same bytes
/// is refused for a moment (503): it can never record the image, keep bytes the removal then
/// deletes, and show it. No store call runs inside a write.
public final class ImageRecords: Sendable {
    /// The tables of resources that show images.
    private let tables: [String]
    /// How many columns name the images shown (each resource's image, a video's poster).
    private let showingColumns: Int
    private let database: any SQLDatabase
    /// That the image whose hash is the argument is shown by no resource (one argument per table).
    private let unreferenced: String
    /// The same, of the row `i` of `images` (no argument).
    private let unreferencedRow: String

    /// The `touched_at` of an image being removed.
    static let removing: Int64 = -1

    init(database: any SQLDatabase, schemas: [ResourceSchema]) {
        self.database = database
        tables = schemas.filter { $0.image != nil }.map(\.table)
        // Each resource's image, and a hosted video's poster.
        let columns = tables.map { ($0, ImageSlot.urlColumn) } + [("playable_items", "video_poster_url")]
        showingColumns = columns.count
        func shownByNone(_ hash: String) -> String {
            columns.map { "NOT EXISTS (SELECT 1 FROM \($0.0) WHERE \($0.1) = '\(ImageMember.path)' || \(hash))" }.joined(separator: " AND ")
        }
        unreferenced = shownByNone("?")
        unreferencedRow = shownByNone("i.hash")
    }

    /// Records the original `image` (`upload`) before its bytes are kept and before a
    /// resource shows it, touched now: when it is recorded already, only touched, so the
    /// sweep leaves it (and its bytes) alone for the grace period. With a quota, the
    /// uploader's images, this one included, may hold at most that many bytes
    /// (``StoreError/quotaExceeded(_:)``), counted with the uploader's row locked.
    package func record(_ image: ImageReference, _ upload: ImageUpload, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        database.submit(WriteOptions(), atomic: true, { db in try Self.record(db, image, upload) }) { result in
            completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 })
        }
    }

    static func record(_ db: any SQLConnection, _ image: ImageReference, _ upload: ImageUpload) throws {
        let byteSize = upload.byteSize, uploader = upload.uploader
        if let quota = upload.quota, let uploader {
            // Locked first, so that one user's uploads are counted one after another.
            _ = try db.exists("SELECT 1 FROM users WHERE id = ?" + db.dialect.forUpdate, [uploader.rawValue])
            let held =
                try db.fetchValue("SELECT coalesce(sum(byte_size), 0) FROM images WHERE uploaded_by = ? AND hash != ?", [uploader.rawValue, image.hash])
                .int ?? 0
            guard held + byteSize <= quota else {
                throw StoreError.quotaExceeded(
                    "Your images hold \(held) bytes; this one (\(byteSize)) would pass your quota of \(quota). Remove an image first (unused ones go within a day).")
            }
        }
        try db.execute(
            """
            INSERT INTO images (hash, content_type, byte_size, width, height, blur_hash, uploaded_by, touched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (hash) DO UPDATE SET touched_at = excluded.touched_at WHERE images.touched_at <> ?
            """,
            [
                image.hash, image.contentType, byteSize, image.width, image.height, image.blurHash, uploader?.rawValue,
                Timestamp.milliseconds(Date()), removing,
            ])
        try checkNotRemoving(db, image.hash)
    }

    /// 503 while the image `hash` is being removed: retried a moment later, the upload or
    /// import records it anew.
    private static func checkNotRemoving(_ db: any SQLConnection, _ hash: String) throws {
        if try db.exists("SELECT 1 FROM images WHERE hash = ? AND touched_at = ?", [hash, removing]) {
            throw StoreError.unavailable("The image is being removed; send it again in a moment.")
        }
    }

    /// Up to `limit` images touched before `cutoff` (milliseconds: uploaded, or last shown)
    /// that no resource shows, oldest first, from after `position` (the last one of the
    /// previous page): the sweep's candidates, page by page.
    public func unreferenced(
        before cutoff: Int64, after position: (touched: Int64, hash: String)? = nil, limit: Int = 500
    ) throws(StoreError)
        -> [(touched: Int64, hash: String)]
    {
        let after = position ?? (Int64.min, "")
        return try guarded {
            try database.read { db in
                let rows = try db.query(
                    """
                    SELECT touched_at, hash FROM images i WHERE touched_at < ? AND (touched_at > ? OR (touched_at = ? AND hash > ?)) AND \(unreferencedRow)
                    ORDER BY touched_at, hash LIMIT ?
                    """, [cutoff, after.touched, after.touched, after.hash, limit])
                var found: [(touched: Int64, hash: String)] = []
                while try rows.step() { found.append((rows.integer(0), String(decoding: rows.text(1), as: UTF8.self))) }
                return found
            }
        }
    }

    /// Marks the image `hash` for removal when it is still shown by nothing and untouched
    /// since `cutoff` (an upload of the same bytes since has touched it), or, when it has no
    /// record (bytes an upload kept before its write failed), records it so marked; whether
    /// it did: its bytes may then go, and ``drop(_:)`` its row. Blocking: for the sweep.
    public func claim(_ hash: String, before cutoff: Int64) throws(StoreError) -> Bool {
        try guarded {
            try database.write(atomic: true) { db in
                let touched = try db.fetchValue("SELECT touched_at FROM images WHERE hash = ?" + db.dialect.forUpdate, [hash]).int64
                guard let touched else {
                    try db.execute(
                        "INSERT INTO images (hash, content_type, byte_size, width, height, blur_hash, uploaded_by, touched_at) VALUES (?, '', 0, 0, 0, '', NULL, ?)",
                        [hash, Self.removing])
                    return true
                }
                guard touched < cutoff, try self.isUnreferenced(db, hash) else { return false }
                try db.execute("UPDATE images SET touched_at = ? WHERE hash = ?", [Self.removing, hash])
                return true
            }
        }
    }

    /// Deletes the row of the image `hash` once its bytes are gone (``claim(_:before:)``). Blocking.
    public func drop(_ hash: String) throws(StoreError) {
        try guarded {
            try database.write { db in _ = try db.execute("DELETE FROM images WHERE hash = ? AND touched_at = ?", [hash, Self.removing]) }
        }
    }

    /// Which of `hashes` are recorded.
    public func recorded(_ hashes: [String]) throws(StoreError) -> Set<String> {
        try guarded {
            try database.read { db in
                var found: Set<String> = []
                for hash in hashes where try db.exists("SELECT 1 FROM images WHERE hash = ?", [hash]) { found.insert(hash) }
                return found
            }
        }
    }

    /// Whether no resource references the image `hash`.
    func isUnreferenced(_ db: any SQLConnection, _ hash: String) throws -> Bool {
        try db.exists("SELECT 1 WHERE " + unreferenced, Array(repeating: hash, count: showingColumns))
    }

    /// The hash of the image the row `id` of `table` shows, if any (read in a write, before the row changes).
    func imageHash(_ db: any SQLConnection, table: String, id: CatalogID) throws -> String? {
        try db.fetchValue("SELECT \(ImageSlot.urlColumn) FROM \(table) WHERE id = ?", [id.rawValue]).string.map { String($0.dropFirst(ImageMember.path.count)) }
    }

    /// Makes `hash` due for the next sweep when nothing shows it any more (an account's
    /// avatar, once the account is deleted, in the same write); whether it did.
    func release(_ db: any SQLConnection, _ hash: String) throws -> Bool {
        guard try isUnreferenced(db, hash) else { return false }
        try db.execute("UPDATE images SET touched_at = 0 WHERE hash = ? AND touched_at <> ?", [hash, Self.removing])
        return true
    }

    /// Touches every image `records` show inside an import's write, so the sweep cannot
    /// take one the import is about to show; a record showing an image this catalog does not
    /// hold (or is removing) is refused, at its pointer.
    static func touchShown(_ db: any SQLConnection, _ records: [ImportRecord]) throws {
        var missing: [FieldError] = []
        let now = Timestamp.milliseconds(Date())
        for (index, record) in records.enumerated() {
            guard let hash = record.values["image"]?.text.flatMap(ImageMember.hash(stored:)) else { continue }
            try db.execute("UPDATE images SET touched_at = ? WHERE hash = ? AND touched_at <> ?", [now, hash, removing])
            guard try db.exists("SELECT 1 FROM images WHERE hash = ? AND touched_at = ?", [hash, now]) else {
                missing.append(
                    Violation(.notFound, "No image with this hash is stored here: send the images first (catalog import --images, or PUT /admin/images/{hash}).")
                        .at("/records/\(index)/data/image"))
                continue
            }
        }
        guard missing.isEmpty else { throw StoreError.invalid(missing) }
    }
}
