import CLinux
import CSearch
import Foundation
import GRDB
import GRDBSQLite

/// The read-only connections reads run on: opened with the SQLite C API and lent, one
/// reader at a time, from a stack behind one lock. Taking GRDB's pooled reader (its
/// semaphore, dispatch queues and generic bookkeeping) cost about a third of the
/// instructions of an answered `GET`; taking one of these costs a lock.
final class SQLiteReaders: @unchecked Sendable {
    private let path: String
    private let capacity: Int
    private let condition = NSCondition()
    private var idle: [SQLiteReader] = []
    private var opened = 0
    private var closed = false

    /// Readers of the database at `path`, at most `capacity` open at once.
    init(path: String, capacity: Int) {
        self.path = path
        self.capacity = max(1, capacity)
    }

    /// Runs `body` with a reader of its own (waiting for one while all are lent).
    func withReader<T>(_ body: (SQLiteReader) throws -> T) throws -> T {
        let reader = try take()
        defer { giveBack(reader) }
        return try body(reader)
    }

    private func take() throws -> SQLiteReader {
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw StoreError.unavailable("The database is closed.")
            }
            if let reader = idle.popLast() {
                condition.unlock()
                return reader
            }
            if opened < capacity {
                opened += 1
                condition.unlock()
                do {
                    return try SQLiteReader(path: path)
                } catch {
                    condition.lock()
                    opened -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            condition.wait()
        }
    }

    private func giveBack(_ reader: SQLiteReader) {
        condition.lock()
        defer { condition.unlock() }
        if closed {
            opened -= 1
            return
        }
        idle.append(reader)
        condition.signal()
    }

    /// Closes the idle readers; those lent close when they come back.
    func close() {
        condition.lock()
        closed = true
        opened -= idle.count
        idle.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}

/// One read-only SQLite connection with its prepared statements, used by one thread at
/// a time: as GRDB's readers were, with a 16 MiB page cache, the read budget's progress
/// handler and the search functions.
final class SQLiteReader {
    let connection: OpaquePointer
    /// Prepared once and kept, as GRDB's statement cache does: the store's statements are
    /// a fixed set (lists build theirs from which parameters are present, never from
    /// their values).
    private var statements: [String: OpaquePointer] = [:]

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
        let registered = csearch_register(UnsafeMutableRawPointer(connection))
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
        if let statement = statements[sql] {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            return statement
        }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(connection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)), sql: sql)
        }
        statements[sql] = statement
        return statement
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
