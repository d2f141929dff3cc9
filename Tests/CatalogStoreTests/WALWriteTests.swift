import CSQLite
import Foundation
import GRDBSQLite
import TestSupport
import Testing

/// The `catalog-wal` VFS (``csqlite_register_wal_vfs``) gathers a transaction's WAL
/// writes: every commit must still be in the file by the time another connection can see
/// it, whatever the transaction's size, and rolled-back work must not corrupt anything.
@Suite struct WALWriteTests {
    /// A raw SQLite connection (the VFS is below GRDB, so the test talks to SQLite directly).
    final class Connection {
        let handle: OpaquePointer

        init(path: String, flags: Int32, vfs: String?) throws {
            var handle: OpaquePointer?
            let opened = sqlite3_open_v2(path, &handle, flags, vfs)
            guard opened == SQLITE_OK, let handle else {
                sqlite3_close(handle)
                throw Failure("open failed: \(opened)")
            }
            self.handle = handle
        }

        deinit { sqlite3_close(handle) }

        func execute(_ sql: String) throws {
            let rc = sqlite3_exec(handle, sql, nil, nil, nil)
            guard rc == SQLITE_OK else { throw Failure("\(sql): \(rc) \(String(cString: sqlite3_errmsg(handle)))") }
        }

        /// The first row's columns as text.
        func row(_ sql: String) throws -> [String] {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK else {
                throw Failure("\(sql): \(String(cString: sqlite3_errmsg(handle)))")
            }
            defer { sqlite3_finalize(statement) }
            let rc = sqlite3_step(statement)
            guard rc == SQLITE_ROW else { throw Failure("\(sql): \(rc) \(String(cString: sqlite3_errmsg(handle)))") }
            return (0..<sqlite3_column_count(statement)).map { column in
                sqlite3_column_text(statement, column).map { String(cString: $0) } ?? "NULL"
            }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// A copy of the database and its WAL as they are on disk now, opened as a crash
    /// would leave them (SQLite recovers the WAL from the file alone, checking every
    /// frame's checksum): its rows' count and total length.
    static func recovered(_ path: String, into directory: URL) throws -> [String] {
        let copy = directory.appendingPathComponent("copy-\(UUID().uuidString).sqlite").path
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) } }
        let connection = try Connection(path: copy, flags: SQLITE_OPEN_READWRITE, vfs: "unix")
        return try connection.row(state)
    }

    /// What a test checks of the database: rows and bytes of `t`, rows of `u`.
    static let state = "SELECT (SELECT count(*) FROM t), (SELECT total(length(v)) FROM t), (SELECT count(*) FROM u)"

    @Test(arguments: ["OFF", "FULL"])
    func everyCommitIsInTheFileWhenAnotherConnectionCanSeeIt(synchronous: String) throws {
        #expect(csqlite_register_wal_vfs() == SQLITE_OK)
        #expect(sqlite3_vfs_find(nil).map { String(cString: $0.pointee.zName) } == "catalog-wal")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-wal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("wal.sqlite").path

        // The writer on the default VFS (catalog-wal). With synchronous=OFF nothing syncs
        // the WAL, so only the writes that complete a commit put it in the file; a small
        // page cache makes large transactions spill frames before they commit, and
        // rewrite some of them in place.
        let writer = try Connection(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
        try writer.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = \(synchronous); PRAGMA cache_size = 20; PRAGMA wal_autocheckpoint = 0")
        try writer.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL); CREATE INDEX t_by_v ON t (v)")
        // Appended only, never read back: a transaction here spills frames nothing reads.
        try writer.execute("CREATE TABLE u (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        // A reader and a second writer on the system's own VFS, as another process would be.
        let reader = try Connection(path: path, flags: SQLITE_OPEN_READONLY, vfs: "unix")
        let other = try Connection(path: path, flags: SQLITE_OPEN_READWRITE, vfs: "unix")

        var generator = SeededGenerator(seed: 7)
        var next = 1, rolledBack = 0
        for round in 0..<60 {
            // Small, medium and larger-than-the-buffer (124 KiB) transactions; some rolled back.
            let count = [1, 40, 400][round % 3]
            let size = Int.random(in: 100...3000, using: &generator)
            let rollBack = round % 7 == 3
            try writer.execute("BEGIN IMMEDIATE")
            try writer.execute(
                """
                WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(count - 1))
                INSERT INTO t (k, v) SELECT \(next) + i, randomblob(\(size)) FROM n
                """)
            if round % 5 == 1 {
                try writer.execute("UPDATE t SET v = randomblob(\(size)) WHERE k % 4 = 1; DELETE FROM t WHERE k % 3 = 0 AND k < \(next)")
            }
            if rollBack {
                // Spilled frames still held when the transaction rolls back must not land
                // later over the frames another writer appends meanwhile.
                try writer.execute(
                    """
                    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 23)
                    INSERT INTO u (v) SELECT randomblob(3900) FROM n
                    """)
                try writer.execute("ROLLBACK")
                rolledBack += 1
                try other.execute(
                    """
                    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 39)
                    INSERT INTO u (v) SELECT randomblob(3900) FROM n
                    """)
            } else {
                try writer.execute("COMMIT")
            }
            next += count
            // The reader first: whatever the writer reads itself would write its buffer out.
            #expect(try reader.row("SELECT count(*), coalesce(sum(length(v) = 3900), 0) FROM u") == ["\(rolledBack * 40)", "\(rolledBack * 40)"])
            let seen = try reader.row(Self.state)
            #expect(try Self.recovered(path, into: directory) == seen, "round \(round): the files hold what readers see")
            #expect(try writer.row(Self.state) == seen, "round \(round)")
        }
        #expect(rolledBack == 9)

        // A rolled-back transaction that spilled many frames in a row, then commits of
        // every size around the buffer's 31 frames: each must be whole in the files.
        var pages = try Int(reader.row("SELECT count(*) FROM u")[0]) ?? 0
        try writer.execute("BEGIN IMMEDIATE")
        try writer.execute("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 44) INSERT INTO u (v) SELECT randomblob(3900) FROM n")
        try writer.execute("ROLLBACK")
        for size in 25...40 {
            try writer.execute("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(size - 1)) INSERT INTO u (v) SELECT randomblob(3900) FROM n")
            pages += size
            let seen = try reader.row(Self.state)
            #expect(seen[2] == "\(pages)", "commit of \(size)")
            #expect(try Self.recovered(path, into: directory) == seen, "commit of \(size)")
        }
        #expect(try reader.row("PRAGMA integrity_check") == ["ok"])
        #expect(try writer.row("PRAGMA integrity_check") == ["ok"])
        #expect(try writer.row("SELECT count(*) FROM u") == ["\(pages)"])
        let final = try reader.row("SELECT count(*), total(length(v)) FROM t")
        try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        #expect(try reader.row("PRAGMA integrity_check") == ["ok"])
        #expect(try reader.row("SELECT count(*), total(length(v)) FROM t") == final)
        #expect((Int(final[0]) ?? 0) > 0 && (Double(final[1]) ?? 0) > 1_000_000)
    }
}
