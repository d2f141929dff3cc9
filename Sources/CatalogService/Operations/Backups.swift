import CatalogMedia
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Synchronization

/// `POST /admin/backups`: a consistent copy of the live database, written by the server
/// itself through SQLite's online backup API (no second process ever opens the live
/// file), into the backup folder, with the images' originals and the hosted videos' files
/// beside it (`NAME.media`, hard links where the disk allows: neither ever changes) when
/// they are kept on local disk; taken after the copy, they hold every image it shows (the
/// sweep keeps an image a day after anything last showed it) and every video it shows
/// but one released in the moments between (unfinished uploads are not copied: their
/// clients start them again). One at a time (409 while one runs); refused (507)
/// when the folder's disk has less than twice the database's size free; the newest
/// ``keep`` copies are kept; a copy whose client has gone stops and is removed.
final class Backups: Sendable {
    let store: CatalogStore
    let directory: String
    /// How many copies the folder keeps; older ones are deleted after each backup.
    let keep: Int
    /// Where images are kept, when on local disk (S3 buckets keep theirs with versioning).
    let media: LocalMediaStore?
    private let running = Mutex(false)

    init(store: CatalogStore, directory: String, keep: Int, media: LocalMediaStore?) {
        self.store = store
        self.directory = directory
        self.keep = keep
        self.media = media
    }

    /// The folder of images beside the copy `name` (`….sqlite` → `….media`).
    static func mediaFolder(of name: String) -> String {
        (name.hasSuffix(".sqlite") ? String(name.dropLast(7)) : name) + ".media"
    }

    func create(isAbandoned: @escaping @Sendable () -> Bool) throws -> HTTPResponse {
        guard store.location.engine == .sqlite else { throw APIError.backupsNotOffered }
        guard
            running.withLock({ running in
                defer { running = true }
                return !running
            })
        else { throw APIError.backupInProgress }
        defer { running.withLock { $0 = false } }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let needed = 2 * store.sizeOnDisk
        if let free = Self.freeBytes(directory), free < needed { throw APIError.insufficientStorage(free: free, needed: needed) }
        let name = "catalog-" + Timestamp.string(from: Date()).replacingOccurrences(of: ":", with: "-") + "-" + String(CatalogID().rawValue.suffix(8)) + ".sqlite"
        let folder = URL(fileURLWithPath: directory)
        let bytes = try store.backup(to: folder.appendingPathComponent(name).path, isCancelled: isAbandoned)
        let images = try media?.copyOriginals(to: folder.appendingPathComponent(Self.mediaFolder(of: name)).path)
        let videos = try media?.copyVideos(to: folder.appendingPathComponent(Self.mediaFolder(of: name)).path)
        prune()
        let body = try JSONResponse.encoder.encode(Backup(name: name, bytes: bytes, integrityCheck: "ok", images: images, videos: videos))
        return HTTPResponse(status: .created, headers: [("Content-Type", JSONResponse.contentType)], body: Array(body))
    }

    /// Deletes all but the newest ``keep`` copies (their names sort by time).
    private func prune() {
        let copies = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("catalog-") && $0.hasSuffix(".sqlite") }.sorted()
        for name in copies.dropLast(keep) {
            try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: directory).appendingPathComponent(name).path)
            try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: directory).appendingPathComponent(Self.mediaFolder(of: name)).path)
        }
    }

    /// The bytes free for an unprivileged writer on the disk holding `directory`.
    private static func freeBytes(_ directory: String) -> Int? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }
}

extension APIError {
    /// 501: the database is PostgreSQL, whose own tools make its backups.
    static let backupsNotOffered = APIError(
        status: .notImplemented, code: "backupsNotOffered",
        detail: """
            This server keeps its data in PostgreSQL: back it up with pg_dump (or continuous archiving), \
            or copy the catalog with `catalog export`.
            """)

    /// 409: a backup is being written.
    static let backupInProgress = APIError(
        status: .conflict, code: "backupInProgress",
        detail: "A backup is being written; retry once it is done.", headers: [("Retry-After", "10")])

    /// 507: not enough room for a copy.
    static func insufficientStorage(free: Int, needed: Int) -> APIError {
        APIError(
            status: HTTPStatus(code: 507), code: "insufficientStorage",
            detail: "The backup folder's disk has \(free) bytes free; a backup needs twice the database's size (\(needed) bytes).")
    }
}
