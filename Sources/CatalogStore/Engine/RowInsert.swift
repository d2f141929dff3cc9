/// An `INSERT` of one row of values into columns of a table, which a connection may send
/// together with the same insert of other rows, as one statement
/// (``SQLConnection/insertDeferred(_:_:)``).
struct RowInsert: Sendable {
    /// The most rows of one statement (a PostgreSQL writer's batch).
    static let maxRows = PostgresWriter.maxBatch

    let table: String
    let columns: [String]
    /// The statement for one row.
    var sql: String { statements[0] }
    /// The statements for 1, 2, 4 … ``maxRows`` rows, made once.
    private let statements: [String]

    init(_ table: String, _ columns: [String]) {
        self.table = table
        self.columns = columns
        statements = sequence(first: 1) { $0 * 2 }.prefix { $0 <= Self.maxRows }.map { insertStatement(table, columns, rows: $0) }
    }

    /// The statement for `rows` rows, their arguments one row after another: made once
    /// for a power of two up to ``maxRows``.
    func sql(rows: Int) -> String {
        let index = rows.trailingZeroBitCount
        guard rows.nonzeroBitCount == 1, index < statements.count else { return insertStatement(table, columns, rows: rows) }
        return statements[index]
    }
}

/// The `INSERT` of `rows` rows (one unless said) into `columns` of `table`, with a `?`
/// for each value.
func insertStatement(_ table: String, _ columns: [String], rows: Int = 1) -> String {
    let row = "(" + columns.map { _ in "?" }.joined(separator: ", ") + ")"
    return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES " + Array(repeating: row, count: rows).joined(separator: ", ")
}
