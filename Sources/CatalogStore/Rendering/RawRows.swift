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

extension RawRows {
    /// Writes `{"items":[…],"nextCursor":"…"}` from rows selected with `LIMIT limit + 1`:
    /// `item` writes each of the first `limit` rows; when a further row exists, the next
    /// cursor is what `cursor` makes of the last row on the page. The page also ends, with
    /// a cursor, once its items have taken `maxBytes` (one item is always written), so no
    /// answer grows with the size of what it lists.
    /// - Returns: the next cursor, `nil` on the last page.
    func writePage(limit: Int, maxBytes: Int = ListRequest.maxPageBytes, into writer: inout JSONWriter,
                   item: (SQLiteStatement, inout JSONWriter) throws -> Void, cursor: (SQLiteStatement) -> String?) throws -> String? {
        writer.raw("{\"items\":[")
        let start = writer.count
        var count = 0
        var cursorOfLast: String?
        var next: String?
        while try step() {
            if let cursorOfLast {
                next = cursorOfLast
                break
            }
            if count > 0 { writer.byte(UInt8(ascii: ",")) }
            try item(statement, &writer)
            count += 1
            if count == limit {
                guard let key = cursor(statement) else { break }
                cursorOfLast = key
            } else if writer.count - start >= maxBytes, let key = cursor(statement) {
                cursorOfLast = key
            }
        }
        writer.byte(UInt8(ascii: "]"))
        if let next {
            writer.raw(",\"nextCursor\":")
            writer.string(next)
        }
        writer.byte(UInt8(ascii: "}"))
        return next
    }
}
