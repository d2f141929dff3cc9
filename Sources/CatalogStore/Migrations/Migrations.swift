import CatalogIdentity
import Foundation

/// A schema migration: one `Migrations/NNNN_description.sql` file (SQLite), or one
/// `Migrations/postgresql/NNNN_description.sql` file (PostgreSQL).
public struct Migration: Sendable, Hashable {
    /// The number that orders it (`NNNN`).
    public let version: Int
    /// The file name, such as `0001_create_catalog.sql`.
    public let fileName: String
    /// The SQL it runs.
    public let sql: String
    /// SHA-256 of the file's bytes.
    public let checksum: String

    /// Reads every `NNNN_description.sql` file of `directory` (SQLite's) or of its
    /// `postgresql` folder, in version order; without one, the migrations this build
    /// carries (``embedded(for:)``).
    /// - Throws: ``MigrationError`` for an unreadable folder, a misnamed file or a duplicate number.
    public static func load(from directory: URL?, for engine: DatabaseEngine = .sqlite) throws -> [Migration] {
        guard let directory else { return embedded(for: engine) }
        let folder = engine == .postgresql ? directory.appendingPathComponent("postgresql") : directory
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        } catch {
            throw MigrationError.directoryUnreadable(folder.path)
        }
        return try ordered(
            names.sorted().filter { $0.hasSuffix(".sql") }.map { name in
                (name, try Data(contentsOf: folder.appendingPathComponent(name)))
            })
    }

    /// The migrations this build carries (`Migrations/` when it was built), used when no
    /// folder is configured: the binary needs no files beside it.
    public static func embedded(for engine: DatabaseEngine) -> [Migration] {
        engine == .postgresql ? embeddedPostgreSQL : embedded
    }

    /// SQLite's migrations this build carries.
    public static let embedded: [Migration] = {
        // The generator checked the names and order when the build was made.
        (try? ordered(EmbeddedMigrations.files.map { ($0.name, Data($0.text.utf8)) })) ?? []
    }()

    private static let embeddedPostgreSQL: [Migration] = {
        (try? ordered(EmbeddedMigrations.postgresql.map { ($0.name, Data($0.text.utf8)) })) ?? []
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

/// Applies migrations in order, each in its own transaction, recording each with its
/// checksum. The engine provides the transaction and runs each file as a script.
enum MigrationRunner {
    static let historyTable = "schema_migrations"

    /// Checks every recorded migration against its file, then applies the missing ones.
    /// - Parameters:
    ///   - transaction: runs its body in a write transaction.
    ///   - script: runs SQL of several statements, without parameters.
    /// - Returns: the file names applied by this call.
    static func migrate(
        _ db: some SQLConnection, migrations: [Migration], transaction: (() throws -> Void) throws -> Void,
        script: @escaping (String) throws -> Void
    ) throws -> [String] {
        try script(
            """
            CREATE TABLE IF NOT EXISTS \(historyTable) (
                version INTEGER PRIMARY KEY, file_name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)
            """)
        let applied = try db.fetchRows("SELECT version, file_name, checksum FROM \(historyTable) ORDER BY version")
        let byVersion = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        for row in applied {
            let version = row[0].int ?? 0
            guard let migration = byVersion[version] else {
                throw MigrationError.unknownApplied(version: version, fileName: row[1].string ?? "")
            }
            guard migration.checksum == row[2].string else { throw MigrationError.modifiedAfterApplying(migration.fileName) }
        }
        let appliedVersions = Set(applied.map { $0[0].int ?? 0 })
        var newlyApplied: [String] = []
        for migration in migrations where !appliedVersions.contains(migration.version) {
            do {
                try transaction {
                    try script(migration.sql)
                    try db.execute(
                        "INSERT INTO \(historyTable) (version, file_name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                        [migration.version, migration.fileName, migration.checksum, ISO8601DateFormatter().string(from: Date())])
                }
            } catch let error as any EngineError {
                throw MigrationError.failed(migration.fileName, error.engineMessage)
            }
            newlyApplied.append(migration.fileName)
        }
        return newlyApplied
    }

    /// Whether every migration is recorded as applied.
    static func isCurrent(_ db: any SQLConnection, migrations: [Migration]) throws -> Bool {
        guard try db.exists(db.dialect.tableExists, [historyTable]) else { return migrations.isEmpty }
        let applied = Set(try db.fetchColumn("SELECT version FROM \(historyTable)").compactMap(\.int))
        return migrations.allSatisfy { applied.contains($0.version) }
    }
}
