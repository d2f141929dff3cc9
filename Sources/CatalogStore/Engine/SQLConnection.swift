/// The rows of a statement, read column by column in place: what the renderer reads
/// straight from, with no row object or string per field. Columns are numbered from 0;
/// what a column returns is valid until the next ``step()``.
protocol SQLRows: AnyObject {
    /// Moves to the next row; false when there are no more.
    func step() throws -> Bool
    func isNull(_ column: Int32) -> Bool
    func integer(_ column: Int32) -> Int64
    func real(_ column: Int32) -> Double
    /// The UTF-8 bytes of a text column.
    func text(_ column: Int32) -> UnsafeBufferPointer<UInt8>
    /// The column as a value of its own type.
    func value(_ column: Int32) -> SQLValue
    /// How many columns each row has.
    var columnCount: Int32 { get }
}

/// Rows whose current row is read again first: a statement's first row, looked at before
/// its rows are read in order.
final class ReplayedRows: SQLRows {
    private let rows: any SQLRows
    private var replaying = true

    /// `rows`, on their first row.
    init(_ rows: any SQLRows) { self.rows = rows }

    func step() throws -> Bool {
        guard replaying else { return try rows.step() }
        replaying = false
        return true
    }
    func isNull(_ column: Int32) -> Bool { rows.isNull(column) }
    func integer(_ column: Int32) -> Int64 { rows.integer(column) }
    func real(_ column: Int32) -> Double { rows.real(column) }
    func text(_ column: Int32) -> UnsafeBufferPointer<UInt8> { rows.text(column) }
    func value(_ column: Int32) -> SQLValue { rows.value(column) }
    var columnCount: Int32 { rows.columnCount }
}

extension SQLRows {
    /// The current row, read whole.
    func row() -> SQLRow {
        SQLRow(values: (0..<columnCount).map { value($0) })
    }
}

/// One connection to the database, lent to a read or a write for its duration.
/// Statements are written with `?` parameters; engines that number them translate.
protocol SQLConnection {
    associatedtype Rows: SQLRows
    /// What SQL this connection speaks.
    var dialect: any SQLDialect { get }
    /// Runs a statement that returns rows (a SELECT, or a write with RETURNING).
    func query(_ sql: String, _ arguments: SQLArguments) throws -> Rows
    /// Runs a statement and returns how many rows it changed.
    @discardableResult
    func execute(_ sql: String, _ arguments: SQLArguments) throws -> Int
    /// Runs a modifying statement whose outcome the caller does not read. A connection may
    /// send it on without waiting (a PostgreSQL writer's, in pipeline mode): its failure
    /// then surfaces at the connection's next statement, savepoint or commit, as a failure
    /// of what runs there, so only work that fails as a whole when any of it fails (a
    /// writer's transaction, which then runs each write again alone) may use it.
    func executeDeferred(_ sql: String, _ arguments: SQLArguments) throws
    /// Inserts a row, as ``executeDeferred(_:_:)``; consecutive inserts of the same
    /// ``RowInsert`` may reach the database as one statement of several rows.
    func insertDeferred(_ insert: RowInsert, _ arguments: SQLArguments) throws
}

extension SQLConnection {
    /// Runs the statement at once (engines that do not defer).
    func executeDeferred(_ sql: String, _ arguments: SQLArguments) throws { try execute(sql, arguments) }

    /// Inserts the row at once (engines that do not defer).
    func insertDeferred(_ insert: RowInsert, _ arguments: SQLArguments) throws { try execute(insert.sql, arguments) }

    /// The first row, read whole; `nil` when there is none.
    func fetchRow(_ sql: String, _ arguments: SQLArguments = []) throws -> SQLRow? {
        let rows = try query(sql, arguments)
        guard try rows.step() else { return nil }
        return rows.row()
    }

    /// Every row, read whole.
    func fetchRows(_ sql: String, _ arguments: SQLArguments = []) throws -> [SQLRow] {
        let rows = try query(sql, arguments)
        var result: [SQLRow] = []
        while try rows.step() { result.append(rows.row()) }
        return result
    }

    /// The first column of every row.
    func fetchColumn(_ sql: String, _ arguments: SQLArguments = []) throws -> [SQLValue] {
        let rows = try query(sql, arguments)
        var values: [SQLValue] = []
        while try rows.step() { values.append(rows.value(0)) }
        return values
    }

    /// The first column of the first row; `.null` when there is no row.
    func fetchValue(_ sql: String, _ arguments: SQLArguments = []) throws -> SQLValue {
        let rows = try query(sql, arguments)
        return try rows.step() ? rows.value(0) : .null
    }

    /// Whether the statement returns a row.
    func exists(_ sql: String, _ arguments: SQLArguments = []) throws -> Bool {
        try query(sql, arguments).step()
    }
}
