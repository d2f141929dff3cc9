import Foundation
import GRDB

/// SQLite copies itself online: a backup is read from one snapshot while writes go on,
/// and a restore replaces the file while no server holds it.
extension SQLiteDatabase: SQLBackups {
    /// Writes a consistent copy of the database to `destination` (a new file) with
    /// SQLite's online backup API, from one read snapshot: it holds every write committed
    /// before it began, and writers are never blocked. The copy is checked with
    /// `PRAGMA integrity_check`.
    /// - Returns: the copy's size in bytes.
    func backup(to destination: String, isCancelled: @escaping () -> Bool) throws -> Int {
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw StoreError.conflict("A backup of that name already exists.")
        }
        try FileManager.default.createDirectory(at: URL(fileURLWithPath: destination).deletingLastPathComponent(), withIntermediateDirectories: true)
        // While it copies, the writer's WAL rewind (which would wait for the copy's read) is put off.
        checkpointer.backupsRunning.add(1, ordering: .relaxed)
        defer { checkpointer.backupsRunning.subtract(1, ordering: .relaxed) }
        let copy = try DatabaseQueue(path: destination)
        do {
            // A thousand pages (4 MiB) at a time, stopping when nobody waits for the copy any more.
            try pool.backup(to: copy, pagesPerStep: 1024) { _ in
                if isCancelled() { throw StoreError.unavailable("The backup was abandoned.") }
            }
        } catch {
            try? copy.close()
            try? FileManager.default.removeItem(atPath: destination)
            throw error
        }
        let integrity = try copy.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        try copy.close()
        guard integrity == "ok" else { throw StoreError.unavailable("The backup failed its integrity check: \(integrity ?? "no answer").") }
        return (try FileManager.default.attributesOfItem(atPath: destination)[.size] as? Int) ?? 0
    }

    /// Replaces the database at `path` with the backup at `source`, after checking the
    /// backup's integrity. Refuses while a server (or anything else) holds the database.
    static func restore(from source: String, to path: String) throws {
        let lock = try DatabaseLock(databasePath: path)
        defer { lock.release() }
        var configuration = Configuration()
        configuration.readonly = true
        let backup = try DatabaseQueue(path: source, configuration: configuration)
        let integrity = try backup.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        guard integrity == "ok" else { throw StoreError.unavailable("\(source) fails its integrity check: \(integrity ?? "no answer").") }
        try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        let target = try DatabaseQueue(path: path)
        try backup.backup(to: target)
        // The restored catalog goes on from an earlier point of its change log: sync tokens
        // handed out since are for another history, and get 410 (a backup from before the
        // change log has none to renew).
        try target.write { db in
            if try Row.fetchOne(db, sql: "SELECT 1 FROM catalog_metadata WHERE key = 'catalog_id'") != nil {
                try db.execute(sql: "UPDATE catalog_metadata SET value = lower(hex(randomblob(16))) WHERE key = 'catalog_id'")
            }
        }
        try target.writeWithoutTransaction { db in _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try target.close()
        try backup.close()
    }
}
