import GRDB
import GRDBSQLite

/// Steps a cached, bound statement with the SQLite C API, for read paths that render
/// columns straight from the statement (no `Row` per row). Resets the statement when
/// released. Use inside a read closure only, for SELECT statements only.
final class RawRows {
    let statement: SQLiteStatement
    private let connection: SQLiteConnection?
    private let sql: String

    init(_ db: Database, sql: String, arguments: StatementArguments) throws {
        let cached = try db.cachedStatement(sql: sql)
        try cached.setArguments(arguments)
        statement = cached.sqliteStatement
        connection = db.sqliteConnection
        self.sql = sql
    }

    deinit { sqlite3_reset(statement) }

    /// Moves to the next row; false when there are no more.
    func step() throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
        }
    }
}
