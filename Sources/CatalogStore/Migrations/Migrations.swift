import CatalogIdentity
import Foundation
import GRDB

/// A schema migration: one `Migrations/NNNN_description.sql` file.
public struct Migration: Sendable, Hashable {
    /// The number that orders it (`NNNN`).
    public let version: Int
    /// The file name, such as `0001_create_catalog.sql`.
    public let fileName: String
    /// The SQL it runs.
    public let sql: String
    /// SHA-256 of the file's bytes.
    public let checksum: String

    /// Reads every `NNNN_description.sql` file of `directory`, in version order; without
    /// one, the migrations this build carries (``embedded``).
    /// - Throws: ``MigrationError`` for an unreadable folder, a misnamed file or a duplicate number.
    public static func load(from directory: URL?) throws -> [Migration] {
        guard let directory else { return embedded }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError.directoryUnreadable(directory.path)
        }
        return try ordered(names.sorted().filter { $0.hasSuffix(".sql") }.map { name in
            (name, try Data(contentsOf: directory.appendingPathComponent(name)))
        })
    }

    /// The migrations this build carries (`Migrations/` when it was built), used when no
    /// folder is configured: the binary needs no files beside it.
    public static let embedded: [Migration] = {
        // The generator checked the names and order when the build was made.
        (try? ordered(EmbeddedMigrations.files.map { ($0.name, Data($0.text.utf8)) })) ?? []
    }()

    /// Migrations from `(file name, bytes)` in name order.
    private static func ordered(_ files: [(name: String, data: Data)]) throws -> [Migration] {
        var migrations: [Migration] = []
        for (name, data) in files {
            let digits = name.prefix { $0.isASCII && $0.isNumber }
            guard digits.count == 4, name.dropFirst(4).first == "_", let version = Int(digits), version > 0 else {
                throw MigrationError.misnamed(name)
            }
            guard migrations.last?.version != version else { throw MigrationError.duplicateVersion(name) }
            migrations.append(Migration(version: version, fileName: name, sql: String(decoding: data, as: UTF8.self), checksum: checksum(data)))
        }
        return migrations
    }

    /// A migration file's fingerprint: the SHA-256 of its bytes, as 64 lowercase hex digits.
    static func checksum(_ data: Data) -> String {
        Crypto.hex(Crypto.sha256(data))
    }
}

/// Why migrating failed. Each message names the file concerned.
public enum MigrationError: Error, CustomStringConvertible, Equatable {
    case directoryUnreadable(String)
    case misnamed(String)
    case duplicateVersion(String)
    /// A migration already applied to the database has different contents now.
    case modifiedAfterApplying(String)
    /// The database records a migration that no file provides (it is newer than this build).
    case unknownApplied(version: Int, fileName: String)
    case failed(String, String)

    /// A one-line explanation naming the file.
    public var description: String {
        switch self {
        case let .directoryUnreadable(path): "cannot read the migrations folder \(path)"
        case let .misnamed(name): "migration file \(name) is not named NNNN_description.sql"
        case let .duplicateVersion(name): "migration file \(name) repeats the number of another file"
        case let .modifiedAfterApplying(name): "migration \(name) was changed after it was applied to this database; restore the original file and add a new migration instead"
        case let .unknownApplied(version, name): "the database has migration \(version) (\(name)) applied, which this build does not have"
        case let .failed(name, message): "migration \(name) failed: \(message)"
        }
    }
}

/// Applies migrations in order, each in its own transaction, recording each with its checksum.
enum MigrationRunner {
    static let historyTable = "schema_migrations"

    /// Checks every recorded migration against its file, then applies the missing ones.
    /// - Returns: the file names applied by this call.
    static func migrate(_ writer: any DatabaseWriter, migrations: [Migration]) throws -> [String] {
        try writer.writeWithoutTransaction { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS \(historyTable) (
                    version INTEGER PRIMARY KEY, file_name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)
                """)
            let applied = try Row.fetchAll(db, sql: "SELECT version, file_name, checksum FROM \(historyTable) ORDER BY version")
            let byVersion = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
            for row in applied {
                let version: Int = row["version"]
                guard let migration = byVersion[version] else {
                    throw MigrationError.unknownApplied(version: version, fileName: row["file_name"])
                }
                guard migration.checksum == row["checksum"] else { throw MigrationError.modifiedAfterApplying(migration.fileName) }
            }
            let appliedVersions = Set(applied.map { $0["version"] as Int })
            var newlyApplied: [String] = []
            for migration in migrations where !appliedVersions.contains(migration.version) {
                do {
                    try db.inTransaction(.immediate) {
                        try db.execute(sql: migration.sql)
                        try db.execute(
                            sql: "INSERT INTO \(historyTable) (version, file_name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                            arguments: [migration.version, migration.fileName, migration.checksum, ISO8601DateFormatter().string(from: Date())])
                        return .commit
                    }
                } catch let error as DatabaseError {
                    throw MigrationError.failed(migration.fileName, error.message ?? "\(error)")
                }
                newlyApplied.append(migration.fileName)
            }
            return newlyApplied
        }
    }

    /// Whether every migration is recorded as applied.
    static func isCurrent(_ db: Database, migrations: [Migration]) throws -> Bool {
        guard try db.tableExists(historyTable) else { return migrations.isEmpty }
        let applied = try Set(Int.fetchAll(db, sql: "SELECT version FROM \(historyTable)"))
        return migrations.allSatisfy { applied.contains($0.version) }
    }
}
