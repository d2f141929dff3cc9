import CPostgres
import Foundation

/// The rows of a result in binary format, read in place (big-endian numbers, raw text):
/// all of them, or some of a result several reads share (``SharedResult``).
final class PostgresRows: SQLRows {
    private let result: OpaquePointer
    /// The rows read: those before `end`, from the one after `row`.
    private let end: Int32
    private var row: Int32
    /// The type of each column (pg_type OIDs).
    private let types: [UInt32]
    /// What clears a shared result once no read holds it; `nil`: the result is these rows' own.
    private let shared: SharedResult?

    init(_ result: OpaquePointer) {
        self.result = result
        end = PQntuples(result)
        row = -1
        types = Self.types(of: result)
        shared = nil
    }

    /// The rows `rows` of `shared`.
    init(_ shared: SharedResult, rows: Range<Int32>) {
        result = shared.result
        (row, end) = (rows.lowerBound - 1, rows.upperBound)
        types = shared.types
        self.shared = shared
    }

    deinit { if shared == nil { PQclear(result) } }

    fileprivate static func types(of result: OpaquePointer) -> [UInt32] {
        (0..<PQnfields(result)).map { PQftype(result, $0) }
    }

    func step() throws -> Bool {
        guard row + 1 < end else { return false }
        row += 1
        return true
    }

    var columnCount: Int32 { Int32(types.count) }

    func isNull(_ column: Int32) -> Bool { PQgetisnull(result, row, column) != 0 }

    private func bytes(_ column: Int32) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: PQgetvalue(result, row, column), count: Int(PQgetlength(result, row, column)))
    }

    func integer(_ column: Int32) -> Int64 {
        let raw = bytes(column)
        switch raw.count {
        case 8: return Int64(bigEndian: raw.loadUnaligned(as: Int64.self))
        case 4: return types[Int(column)] == 23 ? Int64(Int32(bigEndian: raw.loadUnaligned(as: Int32.self))) : Int64(UInt32(bigEndian: raw.loadUnaligned(as: UInt32.self)))
        case 2: return Int64(Int16(bigEndian: raw.loadUnaligned(as: Int16.self)))
        case 1: return Int64(raw[0])
        default: return 0
        }
    }

    func real(_ column: Int32) -> Double {
        let raw = bytes(column)
        switch types[Int(column)] {
        case 701: return Double(bitPattern: UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)))
        case 700: return Double(Float(bitPattern: UInt32(bigEndian: raw.loadUnaligned(as: UInt32.self))))
        case 1700: return Self.numeric(raw)
        default: return Double(integer(column))
        }
    }

    func text(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
        let raw = bytes(column)
        return UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), count: raw.count)
    }

    func value(_ column: Int32) -> SQLValue {
        if isNull(column) { return .null }
        switch types[Int(column)] {
        case 16, 20, 21, 23, 26, 28: return .integer(integer(column))
        case 700, 701, 1700: return .real(real(column))
        case 17: return .blob(Array(bytes(column)))
        default: return .text(String(decoding: text(column), as: UTF8.self))
        }
    }

    /// A `numeric` in binary: digit count, weight, sign, scale, then base-10000 digits.
    private static func numeric(_ raw: UnsafeRawBufferPointer) -> Double {
        guard raw.count >= 8 else { return 0 }
        func word(_ index: Int) -> Int { Int(Int16(bitPattern: UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: index * 2, as: UInt16.self)))) }
        let digits = word(0), weight = word(1), sign = UInt16(truncatingIfNeeded: word(2))
        guard sign != 0xC000, raw.count >= 8 + digits * 2 else { return .nan }
        var value = 0.0
        for index in 0..<digits { value += Double(word(4 + index)) * pow(10_000, Double(weight - index)) }
        return sign == 0x4000 ? -value : value
    }
}

/// A result that answers several reads (``LoopReadSharing``), cleared when the last lets it go.
final class SharedResult {
    let result: OpaquePointer
    let types: [UInt32]

    init(_ result: OpaquePointer) {
        self.result = result
        types = PostgresRows.types(of: result)
    }

    deinit { PQclear(result) }

    /// The row whose column `column` holds the text `key`, if any.
    func row(_ key: String, column: Int32) -> Int32? {
        var key = key
        return key.withUTF8 { key in
            (0..<PQntuples(result)).first { row in
                let length = Int(PQgetlength(result, row, column))
                guard length == key.count, PQgetisnull(result, row, column) == 0 else { return false }
                guard let value = PQgetvalue(result, row, column), let base = key.baseAddress else { return length == 0 }
                return memcmp(value, base, length) == 0
            }
        }
    }
}
