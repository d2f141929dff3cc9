import Foundation

/// A value bound to a statement or read from a row, the same in every engine.
enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    /// Whether an engine is given the same bytes for both: texts byte for byte (Swift's `==`
    /// equates canonically equivalent texts, `"caf\u{e9}"` and `"cafe\u{301}"`, which an engine
    /// compares as different), reals bit for bit (`-0.0 == 0.0` in Swift).
    func isIdentical(to other: SQLValue) -> Bool {
        switch (self, other) {
        case let (.text(a), .text(b)): a.utf8.elementsEqual(b.utf8)
        case let (.real(a), .real(b)): a.bitPattern == b.bitPattern
        default: self == other
        }
    }

    /// The value as an integer (booleans are 0 or 1), if it is one.
    var int64: Int64? {
        if case let .integer(value) = self { value } else { nil }
    }

    var int: Int? { int64.map(Int.init) }

    /// Whether an integer value is non-zero.
    var bool: Bool { (int64 ?? 0) != 0 }

    var string: String? {
        if case let .text(value) = self { value } else { nil }
    }

    /// The value as a number (an integer one too), if it is one.
    var double: Double? {
        switch self {
        case let .real(value): value
        case let .integer(value): Double(value)
        default: nil
        }
    }

    var bytes: [UInt8]? {
        if case let .blob(value) = self { value } else { nil }
    }
}

/// What can be bound to a statement parameter.
protocol SQLArgument: Sendable {
    var sqlValue: SQLValue { get }
}

extension SQLValue: SQLArgument {
    var sqlValue: SQLValue { self }
}

extension Int: SQLArgument {
    var sqlValue: SQLValue { .integer(Int64(self)) }
}

extension Int64: SQLArgument {
    var sqlValue: SQLValue { .integer(self) }
}

extension Double: SQLArgument {
    var sqlValue: SQLValue { .real(self) }
}

extension String: SQLArgument {
    var sqlValue: SQLValue { .text(self) }
}

extension Bool: SQLArgument {
    var sqlValue: SQLValue { .integer(self ? 1 : 0) }
}

extension Data: SQLArgument {
    var sqlValue: SQLValue { .blob(Array(self)) }
}

extension Array: SQLArgument where Element == UInt8 {
    var sqlValue: SQLValue { .blob(self) }
}

extension Optional: SQLArgument where Wrapped: SQLArgument {
    var sqlValue: SQLValue { self?.sqlValue ?? .null }
}

/// A statement's arguments, in parameter order.
typealias SQLArguments = [any SQLArgument]

/// One row read whole (for the small reads of writes and checks; rendering reads
/// columns straight from ``SQLRows``).
struct SQLRow: Sendable {
    let values: [SQLValue]

    subscript(_ index: Int) -> SQLValue { index < values.count ? values[index] : .null }
}

/// A failure reported by a storage engine, classified once by the engine that raised it.
struct SQLError: Error, CustomStringConvertible, Sendable {
    enum Kind: Sendable {
        /// A constraint (unique, foreign key, check) refused the change.
        case constraint
        /// The database is locked or busy; the request may be retried.
        case busy
        /// The statement was interrupted by the read budget or a statement timeout.
        case interrupted
        /// The disk or the database is full.
        case full
        /// A serialization failure or a deadlock: the transaction may be run again.
        case retry
        /// The connection to the database failed.
        case connection
        /// Anything else.
        case other
    }

    let kind: Kind
    /// The engine's own code: SQLite's result code or PostgreSQL's SQLSTATE.
    let code: String
    let message: String

    var description: String { "\(code): \(message)" }
}
