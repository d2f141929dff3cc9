import CatalogModels
import CatalogSchema
import Foundation

/// A hosted video's row (`videos`, Migrations/0015): its upload's durable state, and where
/// its processing is.
package struct VideoRow: Sendable, Equatable {
    package enum State: String, Sendable {
        case uploading, queued, processing, ready, failed, released
    }

    package var id: String
    package var item: CatalogID
    /// Who uploads it; `nil` once that account is gone.
    package var uploader: CatalogID?
    package var state: State
    /// The upload's durable state.
    package var progress: UploadProgress
    /// The `Upload-Metadata` it was created with, as sent.
    package var metadata: String
    /// Who holds it (a request writing the upload, a worker processing it), and until when.
    package var lockedBy: String?
    package var lockedUntil: Int64?
    /// How many times a worker took it.
    package var attempts: Int
    package var error: String?
    /// When it was created, and when an unfinished upload expires (milliseconds since 1970).
    package var createdAt: Int64
    package var expires: Int64?
}

/// Why an upload cannot take a request.
package enum UploadRefusal: Error, Sendable, Equatable {
    /// No such upload (or not the caller's).
    case notFound
    /// It expired or was cancelled.
    case gone
    /// Another request is writing it.
    case locked
    /// The request's offset is not the upload's (`current`).
    case offsetMismatch(current: Int)
    /// All of it arrived already.
    case complete
}

/// What the database knows of hosted videos: each upload's durable offset (written only
/// after its bytes are synced, so the offset it reports is always kept), who writes it
/// at the moment, the processing jobs (claimed with `FOR UPDATE SKIP LOCKED` on PostgreSQL,
/// so each runs on one replica; a worker's lease renewed while it runs, so a killed
/// worker's job is taken again once it ends), and the item's `video` member, which each
/// step writes as a change of the item (a new version, in the change feed).
public final class VideoRecords: Sendable {
    private let database: any SQLDatabase
    private let items: ResourceStore
    private let itemVideoSQL: String
    private static let columns =
        "id, item_id, uploaded_by, state, upload_length, upload_offset, upload_metadata, store_upload, parts, next_part, tail_size, locked_by, locked_until, attempts, error, created_at, expires_at"

    init(database: any SQLDatabase, items: ResourceStore) {
        self.database = database
        self.items = items
        // The video member; a ready video's duration, and its stream URL when given.
        itemVideoSQL =
            "UPDATE playable_items SET video = ?, \(VideoMember.durationColumn) = coalesce(?, \(VideoMember.durationColumn)), "
            + "\(VideoMember.streamColumn) = coalesce(?, \(VideoMember.streamColumn)), "
            + "updated_at = \(database.dialect.greatest)(?, created_at), version = version + 1 WHERE id = ?" + items.returning
    }

    private static func row(_ values: SQLRow) -> VideoRow? {
        guard let id = values[0].string, let item = values[1].string.flatMap(CatalogID.init),
            let state = values[3].string.flatMap(VideoRow.State.init(rawValue:)), let length = values[4].int, let offset = values[5].int,
            let parts = UploadProgress.parts(values[8].string ?? "")
        else { return nil }
        let progress = UploadProgress(
            id: id, length: length, offset: offset, storeUpload: values[7].string, parts: parts, nextPart: values[9].int ?? 1, tailSize: values[10].int ?? 0)
        return VideoRow(
            id: id, item: item, uploader: values[2].string.flatMap(CatalogID.init), state: state, progress: progress, metadata: values[6].string ?? "",
            lockedBy: values[11].string, lockedUntil: values[12].int64, attempts: values[13].int ?? 0, error: values[14].string,
            createdAt: values[15].int64 ?? 0, expires: values[16].int64)
    }

    private func fetchRow(_ db: any SQLConnection, _ sql: String, _ arguments: SQLArguments) throws -> VideoRow? {
        try db.fetchRows(sql, arguments).first.flatMap(Self.row)
    }

    /// Writes the item's `video` member (with its duration and stream URL, when given).
    private func show(_ db: any SQLConnection, _ video: Video?, on item: CatalogID, duration: Double? = nil, stream: String? = nil) throws -> RenderedResource {
        try items.renderWritten(db, itemVideoSQL, [video.map(VideoMember.json), duration, stream, Timestamp.milliseconds(Date()), item.rawValue])
    }

    /// Submits `work` as one transaction; database errors reach `completion` as ``StoreError``.
    private func write<T: Sendable>(
        _ options: WriteOptions, _ completion: @escaping @Sendable (Result<T, any Error>) -> Void, _ work: @escaping (any SQLConnection) throws -> T
    ) {
        database.submit(options, atomic: true, work) { result in completion(result.mapError { $0 is any EngineError ? StoreError.from($0) : $0 }) }
    }

    // MARK: Uploads

    /// Creates the upload `id` of `length` bytes for the item `item`, `user`'s: the item's
    /// video from now on, shown as `uploading`. One uploaded before is released (its files
    /// swept) now if it never became ready, else when this one ends. The user's unfinished uploads, this one included, may hold at most
    /// `quota` bytes (``StoreError/quotaExceeded(_:)``), counted with the user's row locked.
    package func create(
        id: String, item: CatalogID, user: CatalogID, length: Int, metadata: String, quota: Int, expiry: Int64, storeUpload: String?,
        options: WriteOptions = WriteOptions(), completion: @escaping @Sendable (Result<(VideoRow, RenderedResource), any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        write(
            options, completion,
            { [self] db in
                guard try db.exists("SELECT 1 FROM playable_items WHERE id = ?" + db.dialect.forUpdate, [item.rawValue]) else { throw StoreError.notFound }
                _ = try db.exists("SELECT 1 FROM users WHERE id = ?" + db.dialect.forUpdate, [user.rawValue])
                let held =
                    try db.fetchValue(
                        "SELECT coalesce(sum(upload_length - upload_offset), 0) FROM videos WHERE uploaded_by = ? AND state = 'uploading'", [user.rawValue]
                    ).int ?? 0
                guard held + length <= quota else {
                    throw StoreError.quotaExceeded(
                        "Your unfinished uploads still need \(held) bytes; this one (\(length)) would pass your quota of \(quota). Finish or cancel one first.")
                }
                // What the item showed before and did not finish goes; a ready video stays
                // (its files still play) until this one ends (``releaseOthers(_:of:)``).
                try db.execute(
                    "UPDATE videos SET state = 'released', updated_at = ? WHERE item_id = ? AND state IN ('uploading', 'queued', 'processing', 'failed')",
                    [now, item.rawValue])
                try db.execute(
                    """
                    INSERT INTO videos (id, item_id, uploaded_by, state, upload_length, upload_metadata, store_upload, created_at, expires_at, updated_at)
                    VALUES (?, ?, ?, 'uploading', ?, ?, ?, ?, ?, ?)
                    """, [id, item.rawValue, user.rawValue, length, metadata, storeUpload, now, expiry, now])
                let rendered = try show(db, Video(id: id, status: .uploading), on: item)
                guard let row = try fetchRow(db, "SELECT \(Self.columns) FROM videos WHERE id = ?", [id]) else { throw StoreError.notFound }
                return (row, rendered)
            }
        )
    }

    /// The video `id`, as the database holds it now.
    package func row(_ id: String) throws(StoreError) -> VideoRow? {
        try guarded { try database.read { db in try fetchRow(db, "SELECT \(Self.columns) FROM videos WHERE id = ?", [id]) } }
    }

    /// Takes the unfinished upload `id` for `holder`, until `until` (a request appending
    /// to it), when no one else holds it and it is at `offset` (when given).
    package func take(
        _ id: String, for holder: String, until: Int64, offset: Int?, completion: @escaping @Sendable (Result<VideoRow, any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        write(
            WriteOptions(), completion,
            { [self] db in
                let row = try unfinished(db, id, now: now, holder: holder)
                if let offset, offset != row.progress.offset { throw UploadRefusal.offsetMismatch(current: row.progress.offset) }
                try db.execute("UPDATE videos SET locked_by = ?, locked_until = ? WHERE id = ?", [holder, until, id])
                var taken = row
                taken.lockedBy = holder
                taken.lockedUntil = until
                return taken
            }
        )
    }

    /// The unfinished upload `id`, locked for the write, if `holder` (or, `nil`, anyone) may
    /// act on it now; else why not (``UploadRefusal``).
    private func unfinished(_ db: any SQLConnection, _ id: String, now: Int64, holder: String?) throws -> VideoRow {
        guard let row = try fetchRow(db, "SELECT \(Self.columns) FROM videos WHERE id = ?" + db.dialect.forUpdate, [id]) else {
            throw UploadRefusal.notFound
        }
        try Self.check(row, now: now, holder: holder)
        return row
    }

    /// Why `row` cannot take an append now, if it cannot.
    private static func check(_ row: VideoRow, now: Int64, holder: String?) throws(UploadRefusal) {
        switch row.state {
        case .uploading: break
        case .released: throw .gone
        case .queued, .processing, .ready, .failed: throw .complete
        }
        if let expires = row.expires, expires <= now { throw .gone }
        if let lockedBy = row.lockedBy, lockedBy != holder, let until = row.lockedUntil, until > now { throw .locked }
    }

    /// Records `committed` as the upload's durable state, replacing `replaced` (which it
    /// must still be, held by `holder`), and lets it go. When it is whole, the upload is
    /// done: its job is queued, and the item shows it as `processing`.
    package func commit(
        _ committed: UploadProgress, replacing replaced: UploadProgress, holder: String,
        completion: @escaping @Sendable (Result<VideoRow, any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        let whole = committed.offset == committed.length
        write(
            WriteOptions(), completion,
            { [self] db in
                let changed = try db.execute(
                    """
                    UPDATE videos SET upload_offset = ?, parts = ?, next_part = ?, tail_size = ?, locked_by = NULL, locked_until = NULL, updated_at = ?,
                    state = \(whole ? "'queued'" : "state"), expires_at = \(whole ? "NULL" : "expires_at")
                    WHERE id = ? AND state = 'uploading' AND locked_by = ? AND upload_offset = ?
                    """,
                    [committed.offset, committed.partsText, committed.nextPart, committed.tailSize, now, committed.id, holder, replaced.offset])
                guard let row = try fetchRow(db, "SELECT \(Self.columns) FROM videos WHERE id = ?", [committed.id]) else { throw UploadRefusal.notFound }
                guard changed == 1 else { throw row.state == .released ? UploadRefusal.gone : UploadRefusal.locked }
                if whole { _ = try show(db, Video(id: row.id, status: .processing), on: row.item) }
                return row
            }
        )
    }

    /// Lets the upload `id` go without a change (an append that kept nothing).
    package func letGo(_ id: String, holder: String) {
        database.submit(
            WriteOptions(), atomic: false,
            { db in try db.execute("UPDATE videos SET locked_by = NULL, locked_until = NULL WHERE id = ? AND locked_by = ?", [id, holder]) }
        ) { _ in }
    }

    /// Cancels the unfinished upload `id` (tus termination): released, and the item shows
    /// no video. - Returns: the row as it was, whose bytes the caller drops.
    package func cancel(_ id: String, completion: @escaping @Sendable (Result<VideoRow, any Error>) -> Void) {
        let now = Timestamp.milliseconds(Date())
        write(
            WriteOptions(), completion,
            { [self] db in
                let row = try unfinished(db, id, now: now, holder: nil)
                try db.execute("UPDATE videos SET state = 'released', locked_by = NULL, locked_until = NULL, updated_at = ? WHERE id = ?", [now, id])
                try Self.releaseOthers(db, id, of: row.item, now: now)
                _ = try show(db, nil, on: row.item)
                return row
            }
        )
    }

    /// Ends the unfinished uploads past their expiry that no request holds: released, and
    /// their items show the video as failed. - Returns: the rows as they were.
    package func expire(now: Int64 = Timestamp.milliseconds(Date()), limit: Int = 100) throws(StoreError) -> [VideoRow] {
        try guarded {
            try database.write(atomic: true) { [self] db in
                let rows = try db.fetchRows(
                    "SELECT \(Self.columns) FROM videos WHERE state = 'uploading' AND expires_at <= ? AND (locked_until IS NULL OR locked_until < ?) LIMIT ?"
                        + db.dialect.forDeleteSkippingLocked, [now, now, limit]
                ).compactMap(Self.row)
                for row in rows {
                    try db.execute("UPDATE videos SET state = 'released', updated_at = ? WHERE id = ?", [now, row.id])
                    try Self.releaseOthers(db, row.id, of: row.item, now: now)
                    _ = try show(db, Video(id: row.id, status: .failed, error: "The upload expired before it finished."), on: row.item)
                }
                return rows
            }
        }
    }

    /// Extends `holder`'s lease on the upload `id` to `until` (its body still arrives).
    package func renewUpload(_ id: String, holder: String, until: Int64) throws(StoreError) {
        try guarded {
            _ = try database.write { db in
                try db.execute("UPDATE videos SET locked_until = ? WHERE id = ? AND state = 'uploading' AND locked_by = ?", [until, id, holder])
            }
        }
    }

    /// Lets go of everything held, for a server that starts again when it is the only one
    /// (its requests and workers before the restart are gone): uploads are free, and
    /// jobs that were running wait again.
    package func recoverAlone() throws(StoreError) {
        try guarded {
            _ = try database.write(atomic: true) { db in
                try db.execute("UPDATE videos SET locked_by = NULL, locked_until = NULL WHERE state = 'uploading' AND locked_by IS NOT NULL", [])
                return try db.execute("UPDATE videos SET state = 'queued', locked_by = NULL, locked_until = NULL WHERE state = 'processing'", [])
            }
        }
    }

    /// Releases the ready videos of `item` other than `id`, which just ended: nothing shows
    /// them any more.
    private static func releaseOthers(_ db: any SQLConnection, _ id: String, of item: CatalogID, now: Int64) throws {
        try db.execute("UPDATE videos SET state = 'released', updated_at = ? WHERE item_id = ? AND id <> ? AND state = 'ready'", [now, item.rawValue, id])
    }

    // MARK: Processing jobs

    /// Takes the oldest job waiting (queued, or held by a worker whose lease ended) for
    /// `worker`, until `until`. - Returns: its row, or `nil` when none waits.
    package func claim(worker: String, until: Int64, now: Int64 = Timestamp.milliseconds(Date())) throws(StoreError) -> VideoRow? {
        try guarded {
            try database.write(atomic: true) { [self] db in
                guard
                    var row = try fetchRow(
                        db,
                        "SELECT \(Self.columns) FROM videos WHERE state = 'queued' OR (state = 'processing' AND locked_until < ?) ORDER BY updated_at LIMIT 1"
                            + db.dialect.forDeleteSkippingLocked, [now])
                else { return nil }
                try db.execute(
                    "UPDATE videos SET state = 'processing', locked_by = ?, locked_until = ?, attempts = attempts + 1, updated_at = ? WHERE id = ?",
                    [worker, until, now, row.id])
                row.state = .processing
                row.lockedBy = worker
                row.lockedUntil = until
                row.attempts += 1
                return row
            }
        }
    }

    /// Extends `worker`'s lease on its job `id` to `until`.
    package func renew(_ id: String, worker: String, until: Int64) throws(StoreError) {
        try guarded {
            _ = try database.write { db in
                try db.execute("UPDATE videos SET locked_until = ? WHERE id = ? AND state = 'processing' AND locked_by = ?", [until, id, worker])
            }
        }
    }

    /// Ends `worker`'s job `id` with its outcome `video` (ready or failed), shown on the
    /// item with its duration and, when given, its stream URL (`stream`). - Returns: false when the
    /// worker no longer held it (its lease ended and another took it, or it was released).
    @discardableResult
    package func finish(_ id: String, worker: String, video: Video, duration: Double?, stream: String?) throws(StoreError) -> Bool {
        let now = Timestamp.milliseconds(Date())
        return try guarded {
            try database.write(atomic: true) { [self] db in
                guard
                    let row = try fetchRow(
                        db, "SELECT \(Self.columns) FROM videos WHERE id = ? AND state = 'processing' AND locked_by = ?" + db.dialect.forUpdate, [id, worker])
                else { return false }
                try db.execute(
                    "UPDATE videos SET state = ?, error = ?, locked_by = NULL, locked_until = NULL, updated_at = ? WHERE id = ?",
                    [video.status == .ready ? "ready" : "failed", video.error, now, id])
                try Self.releaseOthers(db, id, of: row.item, now: now)
                _ = try show(db, video, on: row.item, duration: duration, stream: stream)
                return true
            }
        }
    }

    /// Gives `worker`'s job `id` back to the queue, behind the others, for another run: a
    /// shutdown mid-job (which does not count as an attempt), or a storage that failed.
    package func requeue(_ id: String, worker: String, countsAsAttempt: Bool) throws(StoreError) {
        let now = Timestamp.milliseconds(Date())
        try guarded {
            _ = try database.write { db in
                try db.execute(
                    "UPDATE videos SET state = 'queued', locked_by = NULL, locked_until = NULL, attempts = attempts - ?, updated_at = ? "
                        + "WHERE id = ? AND state = 'processing' AND locked_by = ?",
                    [countsAsAttempt ? 0 : 1, now, id, worker])
            }
        }
    }

    // MARK: Sweeping

    /// Videos released (replaced, cancelled, expired, or of a deleted item), whose files go,
    /// but for those a request or worker still holds (their files go once it lets go).
    package func released(limit: Int = 100, now: Int64 = Timestamp.milliseconds(Date())) throws(StoreError) -> [VideoRow] {
        try guarded {
            try database.read { db in
                try db.fetchRows(
                    "SELECT \(Self.columns) FROM videos WHERE state = 'released' AND (locked_until IS NULL OR locked_until < ?) ORDER BY updated_at LIMIT ?",
                    [now, limit]
                ).compactMap(Self.row)
            }
        }
    }

    /// Forgets the released video `id`, once its files are gone.
    package func forget(_ id: String) throws(StoreError) {
        try guarded { _ = try database.write { db in try db.execute("DELETE FROM videos WHERE id = ? AND state = 'released'", [id]) } }
    }
}
