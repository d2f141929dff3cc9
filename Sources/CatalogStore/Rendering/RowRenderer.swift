import CatalogModels
import GRDB
import GRDBSQLite

/// One member of a resource's JSON object and the column it comes from.
struct RenderedField: Sendable {
    enum Kind: Sendable {
        /// A string; NULL (for optional fields) is omitted, as for every kind.
        case text
        case real
        case integer
        /// Milliseconds since 1970, written as an RFC 3339 string.
        case timestamp
    }

    /// The JSON key, quoted, with its colon (`"title":`).
    let key: [UInt8]
    let column: String
    let kind: Kind

    init(_ key: String, _ column: String, _ kind: Kind) {
        self.key = Array("\"\(key)\":".utf8)
        self.column = column
        self.kind = kind
    }
}

/// Renders result rows straight from the SQLite statement to JSON, without a `Row`,
/// a model or a `String` per field: the fields in sorted key order (as the wire
/// encoder sorts them), absent optionals omitted, timestamps as RFC 3339
/// milliseconds. `RenderingParityTests` check the output equals the Codable models'.
struct RowRenderer: Sendable {
    /// Fields sorted by key.
    let fields: [RenderedField]

    init(_ fields: [RenderedField]) {
        self.fields = fields.sorted { $0.key.lexicographicallyPrecedes($1.key) }
    }

    /// The column names to select, in the order `render` reads them (from column 0).
    var columns: [String] { fields.map(\.column) }

    /// The index of `column` among ``columns``.
    func index(of column: String) -> Int32 {
        Int32(fields.firstIndex { $0.column == column } ?? 0)
    }

    /// Appends the JSON object of the statement's current row.
    func render(_ statement: SQLiteStatement, into writer: inout JSONWriter) {
        writer.byte(UInt8(ascii: "{"))
        var first = true
        for (offset, field) in fields.enumerated() {
            let column = Int32(offset)
            let type = sqlite3_column_type(statement, column)
            if type == SQLITE_NULL { continue }
            if !first { writer.byte(UInt8(ascii: ",")) }
            first = false
            writer.raw(field.key)
            switch field.kind {
            case .text:
                writer.string(utf8: Self.text(statement, column))
            case .real:
                writer.number(sqlite3_column_double(statement, column))
            case .integer:
                writer.integer(sqlite3_column_int64(statement, column))
            case .timestamp:
                writer.timestamp(milliseconds: sqlite3_column_int64(statement, column))
            }
        }
        writer.byte(UInt8(ascii: "}"))
    }

    /// The bytes of a text column, valid until the statement steps again.
    static func text(_ statement: SQLiteStatement, _ column: Int32) -> UnsafeBufferPointer<UInt8> {
        guard let pointer = sqlite3_column_text(statement, column) else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(statement, column)))
    }
}
