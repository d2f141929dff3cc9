import Foundation
import GRDB
import GRDBSQLite

/// The writer's SQLite connection, lent by GRDB, speaking ``SQLConnection``: statements
/// come from GRDB's per-connection cache.
struct SQLiteSession: SQLConnection {
    let db: Database
    /// Whether statements are bound and stepped with the SQLite C API, as in the writer's
    /// batches, rather than by GRDB, as in migrations (whose schema changes GRDB must
    /// see). GRDB's stepping costs about a fifth of a create's work on the writer's thread.
    let direct: Bool

    var dialect: any SQLDialect { SQLiteDialect() }

    func query(_ sql: String, _ arguments: SQLArguments) throws -> SQLiteRows {
        let statement = try db.cachedStatement(sql: sql)
        guard direct else {
            try statement.setArguments(StatementArguments(arguments.map(\.sqlValue.databaseValue)))
            return SQLiteRows(statement, stepping: try Row.fetchCursor(statement), sql: sql)
        }
        try db.requireTransaction(sql)
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        try bind(raw, arguments, sql: sql)
        return SQLiteRows(statement, stepping: nil, sql: sql, connection: db.sqliteConnection)
    }

    func execute(_ sql: String, _ arguments: SQLArguments) throws -> Int {
        guard direct else {
            try db.cachedStatement(sql: sql).execute(arguments: StatementArguments(arguments.map(\.sqlValue.databaseValue)))
            return db.changesCount
        }
        return try query(sql, arguments).run()
    }
}

/// A read on a ``SQLiteReader``, speaking ``SQLConnection``.
struct SQLiteReadSession: SQLConnection {
    let reader: SQLiteReader

    var dialect: any SQLDialect { SQLiteDialect() }

    func query(_ sql: String, _ arguments: SQLArguments) throws -> SQLiteRows {
        let statement = try reader.statement(sql)
        try bind(statement, arguments, sql: sql)
        return SQLiteRows(statement, sql: sql, connection: reader.connection)
    }

    func execute(_ sql: String, _ arguments: SQLArguments) throws -> Int {
        try query(sql, arguments).run()
    }
}

/// Binds `arguments` to the parameters of `statement` (a statement of `sql`): as many as
/// it has, or it throws (a reset keeps the last bindings, so a parameter left out would
/// reuse the previous request's value).
private func bind(_ statement: OpaquePointer, _ arguments: SQLArguments, sql: String) throws {
    guard sqlite3_bind_parameter_count(statement) == Int32(arguments.count) else {
        throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "\(arguments.count) arguments for \(sqlite3_bind_parameter_count(statement)) parameters", sql: sql)
    }
    for (index, argument) in arguments.enumerated() {
        let parameter = Int32(index + 1)
        let code: Int32 =
            switch argument.sqlValue {
            case .null: sqlite3_bind_null(statement, parameter)
            case let .integer(value): sqlite3_bind_int64(statement, parameter, value)
            case let .real(value): sqlite3_bind_double(statement, parameter, value)
            case let .text(value): sqlite3_bind_text(statement, parameter, value, Int32(value.utf8.count), SQLITE_TRANSIENT)
            case let .blob(bytes): bytes.withUnsafeBytes { sqlite3_bind_blob(statement, parameter, $0.baseAddress, Int32($0.count), SQLITE_TRANSIENT) }
            }
        guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot bind parameter \(parameter)", sql: sql) }
    }
}

/// The SQLITE_TRANSIENT destructor: SQLite copies what is bound.
// swift-format-ignore: AlwaysUseLowerCamelCase
private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// Rows of a cached SQLite statement (GRDB's, or a reader's own), read with the C API.
/// Resets the statement when released.
final class SQLiteRows: SQLRows {
    let statement: SQLiteStatement
    /// GRDB's cursor, which steps writes; `nil` for reads stepped here.
    private let cursor: RowCursor?
    private let connection: OpaquePointer?
    private let sql: String
    /// Keeps GRDB's statement (and so the SQLite one) alive; a reader's own statements
    /// live as long as the reader.
    private let owner: Statement?

    init(_ statement: Statement, stepping cursor: RowCursor?, sql: String, connection: OpaquePointer? = nil) {
        owner = statement
        self.statement = statement.sqliteStatement
        self.cursor = cursor
        self.connection = connection
        self.sql = sql
    }

    /// Rows of one of a reader's statements, bound and ready to step.
    init(_ statement: SQLiteStatement, sql: String, connection: OpaquePointer) {
        owner = nil
        self.statement = statement
        cursor = nil
        self.connection = connection
        self.sql = sql
    }

    /// Whether the statement has run to its end: stepping it again would run it again.
    private var done = false

    deinit { if cursor == nil { sqlite3_reset(statement) } }

    func step() throws -> Bool {
        if let cursor { return try cursor.next() != nil }
        if done { return false }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            done = true
            return false
        case let code:
            let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
        }
    }

    /// Steps to the end. - Returns: how many rows the statement changed.
    func run() throws -> Int {
        while try step() {}
        return Int(sqlite3_changes(sqlite3_db_handle(statement)))
    }

    var columnCount: Int32 { sqlite3_column_count(statement) }

    @inline(__always) func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    @inline(__always) func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    @inline(__always) func real(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }

    @inline(__always) func text(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
        guard let pointer = sqlite3_column_text(statement, column) else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column)))
    }

    func value(_ column: Int32) -> SQLValue {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT: .text(String(decoding: text(column), as: UTF8.self))
        case SQLITE_BLOB:
            if let pointer = sqlite3_column_blob(statement, column) {
                .blob(Array(UnsafeRawBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column)))))
            } else {
                .blob([])
            }
        default: .null
        }
    }
}

extension SQLValue {
    /// The value as GRDB binds it.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case let .integer(value): value.databaseValue
        case let .real(value): value.databaseValue
        case let .text(value): value.databaseValue
        case let .blob(bytes): Data(bytes).databaseValue
        }
    }
}

extension DatabaseError: EngineError {
    var engineMessage: String { message ?? "\(self)" }

    var storeError: StoreError {
        switch resultCode {
        case .SQLITE_CONSTRAINT: .conflict("The change conflicts with existing data.")
        case .SQLITE_BUSY, .SQLITE_LOCKED: .unavailable("The database is busy; retry shortly.")
        case .SQLITE_INTERRUPT: .tooExpensive
        case .SQLITE_FULL: .unavailable("The database is full.")
        default: .unavailable("The database failed to complete the request.")
        }
    }
}

extension Database {
    /// Throws `SQLITE_ABORT` once SQLite has rolled the writer's transaction back by itself
    /// after a failed statement (a full disk, an I/O error, an interrupt): then nothing
    /// more runs, and above all not outside a transaction, each statement committing
    /// alone. Checked before every statement of a batch (``SQLiteSession``, the savepoints,
    /// ``SQLiteWriter/finish(_:)``, the commit), as GRDB's `inTransaction` checks its own.
    func requireTransaction(_ sql: String) throws {
        guard isInsideTransaction else { throw DatabaseError(resultCode: .SQLITE_ABORT, message: "The transaction was rolled back.", sql: sql) }
    }
}
