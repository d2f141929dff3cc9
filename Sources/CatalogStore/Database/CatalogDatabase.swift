import Foundation
import GRDB

/// The SQLite database: WAL, `synchronous=FULL`, foreign keys, a busy timeout, one
/// group-committing writer and a pool of readers.
final class CatalogDatabase: Sendable {
    let pool: DatabasePool
    let writes: WriteQueue

    init(path: String, readers: Int) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        configuration.maximumReaderCount = max(2, readers)
        configuration.persistentReadOnlyConnections = true
        configuration.label = "catalog"
        pool = try DatabasePool(path: path, configuration: configuration)
        // GRDB sets NORMAL on the writer when it enables WAL; an acknowledged write must
        // survive power loss, so the one writer connection commits with FULL.
        let synchronous = try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            return try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
        guard synchronous == 2 else { throw StoreError.unavailable("SQLite refused synchronous=FULL.") }
        writes = WriteQueue(writer: pool)
    }

    /// Runs a read on a pooled reader connection. Single statements need no transaction.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.unsafeRead(body)
    }

    func close() throws {
        writes.stop()
        try pool.close()
    }
}
