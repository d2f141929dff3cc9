/// One row made of values a statement bound, read as ``SQLRows`` the way SQLite reads a
/// stored value back (an integer read as a real, a real read as an integer), so that a
/// renderer writes the row a write has just stored without reading it back
/// (``ResourceStore``'s creations, which spare SQLite's `RETURNING`).
final class BoundRow: SQLRows {
    private let values: [SQLValue]
    /// The UTF-8 of every text value, one after another, and where each one's bytes are.
    private let text: UnsafeMutableBufferPointer<UInt8>
    private let spans: [Range<Int>]
    private var stepped = false

    init(_ values: [SQLValue]) {
        self.values = values
        var spans: [Range<Int>] = []
        spans.reserveCapacity(values.count)
        var count = 0
        for value in values {
            let length = if case let .text(string) = value { string.utf8.count } else { 0 }
            spans.append(count..<count + length)
            count += length
        }
        text = .allocate(capacity: max(count, 1))
        for (value, span) in zip(values, spans) {
            if case let .text(string) = value {
                _ = UnsafeMutableBufferPointer(rebasing: text[span]).initialize(from: string.utf8)
            }
        }
        self.spans = spans
    }

    deinit { text.deallocate() }

    /// The row, once.
    func step() throws -> Bool {
        defer { stepped = true }
        return !stepped
    }

    func isNull(_ column: Int32) -> Bool { values[Int(column)] == .null }

    func integer(_ column: Int32) -> Int64 {
        switch values[Int(column)] {
        case let .integer(value): value
        // SQLite's conversion: toward zero, clamped to the integers' range.
        case let .real(value):
            value.isNaN ? 0 : value >= 9.223372036854775807e18 ? .max : value <= -9.223372036854775808e18 ? .min : Int64(value)
        default: 0
        }
    }

    func real(_ column: Int32) -> Double {
        switch values[Int(column)] {
        case let .integer(value): Double(value)
        case let .real(value): value
        default: 0
        }
    }

    /// The bytes of a text value; empty for any other value (a renderer reads text
    /// columns only as text: a declared field's kind fixes its column's values).
    func text(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: text[spans[Int(column)]])
    }

    func value(_ column: Int32) -> SQLValue { values[Int(column)] }

    var columnCount: Int32 { Int32(values.count) }
}
