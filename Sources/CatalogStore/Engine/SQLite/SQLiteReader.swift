import CLinux
import CSQLite
import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// One read-only SQLite connection with its prepared statements, which reads run on, lent
/// by a ``ConnectionPool`` to one thread at a time: as GRDB's readers were, with a 16 MiB
/// page cache, the read budget's progress handler and the search functions. Taking GRDB's
/// pooled reader (its semaphore, dispatch queues and generic bookkeeping) cost about a
/// third of the instructions of an answered `GET`; taking one of these costs a lock.
final class SQLiteReader: PooledConnection {
    let connection: OpaquePointer
    /// Prepared once and kept, as GRDB's statement cache does: the store's statements are
    /// a fixed set (lists build theirs from which parameters are present, never from
    /// their values).
    private var statements: [StatementKey: OpaquePointer] = [:]
    /// A read-only connection to a local file stays usable.
    var isBroken: Bool { false }
    /// `PRAGMA data_version` when this connection last read it.
    private var dataVersion: Int64?

    init(path: String) throws {
        var connection: OpaquePointer?
        let code = sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let connection else {
            let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            sqlite3_close_v2(connection)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message)
        }
        self.connection = connection
        sqlite3_busy_timeout(connection, 5_000)
        sqlite3_progress_handler(connection, 1000, clinux_budget_exceeded, nil)
        let registered = csqlite_register_search(UnsafeMutableRawPointer(connection))
        guard registered == SQLITE_OK, sqlite3_exec(connection, "PRAGMA cache_size = -16384", nil, nil, nil) == SQLITE_OK else {
            sqlite3_close_v2(connection)
            throw StoreError.unavailable("A SQLite reader could not be set up (\(registered)).")
        }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(connection)
    }

    /// The prepared statement for `sql`, reset, with its bindings cleared.
    func statement(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[StatementKey(sql)] {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            return statement
        }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(connection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)), sql: sql)
        }
        statements[StatementKey(sql)] = statement
        return statement
    }

    /// Reads `PRAGMA data_version` (it changes once another connection has committed) and
    /// moves `generations` on when it changed since this connection last read it.
    /// - Returns: the generation after that.
    func observeCommits(_ generations: Generations) throws -> UInt64 {
        let statement = try statement("PRAGMA data_version")
        defer { sqlite3_reset(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else {
            throw DatabaseError(resultCode: ResultCode(rawValue: sqlite3_errcode(connection)), message: String(cString: sqlite3_errmsg(connection)))
        }
        let version = sqlite3_column_int64(statement, 0)
        if version != dataVersion {
            dataVersion = version
            generations.value.add(1, ordering: .sequentiallyConsistent)
        }
        return generations.value.load(ordering: .sequentiallyConsistent)
    }

    /// Runs a statement that returns no rows (BEGIN, COMMIT).
    func execute(_ sql: String) throws {
        let statement = try statement(sql)
        let code = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard code == SQLITE_DONE || code == SQLITE_ROW else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)), sql: sql)
        }
    }
}

/// The generation of a SQLite database (``SQLDatabase/generation()``), shared by its readers.
final class Generations: Sendable {
    let value = Atomic<UInt64>(0)
}
