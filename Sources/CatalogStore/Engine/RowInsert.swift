/// An `INSERT` of one row of values into columns of a table, which a connection may send
/// together with the same insert of other rows, as one statement
/// (``SQLConnection/insertDeferred(_:_:)``).
struct RowInsert: Sendable {
    let table: String
    let columns: [String]
    /// The statement for one row.
    let sql: String

    init(_ table: String, _ columns: [String]) {
        self.table = table
        self.columns = columns
        sql = insertStatement(table, columns)
    }

    /// The statement for `rows` rows, their arguments one row after another.
    func sql(rows: Int) -> String {
        let row = "(" + columns.map { _ in "?" }.joined(separator: ", ") + ")"
        return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES " + Array(repeating: row, count: rows).joined(separator: ", ")
    }
}

/// The `INSERT` of one row into `columns` of `table`, with a `?` for each.
func insertStatement(_ table: String, _ columns: [String]) -> String {
    "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
}
