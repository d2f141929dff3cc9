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
/// kept, by its SHA-256, with who uploaded it (their quota) and when; and which resources
/// reference an image (their `image_url`). The bytes are the media store's.
public final class ImageRecords: Sendable {
    /// The tables of resources that show images.
    private let tables: [String]
    private let database: any SQLDatabase
    /// `NOT EXISTS` a reference to the image whose URL is the argument, in every table (one argument each).
    private let unreferenced: String

    init(database: any SQLDatabase, schemas: [ResourceSchema]) {
        self.database = database
        tables = schemas.filter { $0.image != nil }.map(\.table)
        unreferenced = tables.map { "NOT EXISTS (SELECT 1 FROM \($0) WHERE \(ImageSlot.urlColumn) = ?)" }.joined(separator: " AND ")
    }

    /// Records the original `image` (`upload`) before its bytes are kept and before a
    /// resource shows it, touched now: when it is recorded already, only touched, so the
    /// sweep leaves it (and its bytes) alone for the grace period, whatever it had decided.
    /// With a quota, the uploader's images, this one included, may hold at most that many
    /// bytes (``StoreError/quotaExceeded(_:)``).
    package func record(_ image: ImageReference, _ upload: ImageUpload, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        database.submit(WriteOptions(), atomic: false, { db in try Self.record(db, image, upload) }) { result in
            completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 })
        }
    }

    private static func record(_ db: any SQLConnection, _ image: ImageReference, _ upload: ImageUpload) throws {
        let byteSize = upload.byteSize, uploader = upload.uploader
        if let quota = upload.quota, let uploader {
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
            ON CONFLICT (hash) DO UPDATE SET touched_at = excluded.touched_at
            """,
            [
                image.hash, image.contentType, byteSize, image.width, image.height, image.blurHash, uploader?.rawValue,
                Timestamp.milliseconds(Date()),
            ])
    }

    /// The images touched before `cutoff` (milliseconds: uploaded, or last shown by a
    /// resource) that no resource shows: the sweep's candidates.
    public func unreferenced(before cutoff: Int64, limit: Int = 1000) throws(StoreError) -> [String] {
        try guarded {
            try database.read { db in
                let rows = try db.query(
                    "SELECT hash FROM images WHERE touched_at < ? ORDER BY touched_at LIMIT ?", [cutoff, limit])
                var hashes: [String] = []
                while try rows.step() { hashes.append(String(decoding: rows.text(0), as: UTF8.self)) }
                return try hashes.filter { hash in try self.isUnreferenced(db, hash) }
            }
        }
    }

    /// Forgets the image `hash` when it is still unreferenced and untouched since `cutoff`
    /// (an upload of the same bytes since has touched it), `removing` its bytes inside the
    /// same transaction, before it commits: an upload of the same bytes records them after,
    /// and so keeps them again after (``record(_:_:completion:)``). Whether it did.
    public func forget(
        _ hash: String, before cutoff: Int64, removing: @escaping @Sendable () throws -> Void,
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void
    ) {
        database.submit(
            WriteOptions(), atomic: true,
            { db in
                guard try db.exists("SELECT 1 FROM images WHERE hash = ? AND touched_at < ?" + db.dialect.forDelete, [hash, cutoff]),
                    try self.isUnreferenced(db, hash)
                else { return false }
                try removing()
                try db.execute("DELETE FROM images WHERE hash = ?", [hash])
                return true
            }
        ) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
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
        let url = ImageMember.path + hash
        return try db.exists("SELECT 1 WHERE " + unreferenced, tables.map { _ in url })
    }

    /// The hash of the image the row `id` of `table` shows, if any (read in a write, before the row changes).
    func imageHash(_ db: any SQLConnection, table: String, id: CatalogID) throws -> String? {
        try db.fetchValue("SELECT \(ImageSlot.urlColumn) FROM \(table) WHERE id = ?", [id.rawValue]).string.map { String($0.dropFirst(ImageMember.path.count)) }
    }

    /// Forgets `hash` now when nothing references it any more (an account's avatar, once the
    /// account is deleted, in the same write); whether it did.
    func forgetIfUnreferenced(_ db: any SQLConnection, _ hash: String) throws -> Bool {
        guard try isUnreferenced(db, hash) else { return false }
        try db.execute("DELETE FROM images WHERE hash = ?", [hash])
        return true
    }
}
