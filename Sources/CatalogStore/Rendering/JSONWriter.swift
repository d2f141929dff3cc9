import CatalogModels
import Foundation

/// Appends JSON text to a growable byte buffer, byte for byte as
/// `CatalogJSON.makeEncoder()` writes it (sorted keys, unescaped slashes, numbers as
/// Swift prints them without a trailing `.0`), so hot read paths can render rows
/// without building models. Small writes are plain stores into spare capacity (no
/// per-append bookkeeping of `Array`); ``bytes`` copies the result out once.
struct JSONWriter {
    /// The buffer; a class so the memory is freed once, when the writer goes.
    private final class Storage {
        var start: UnsafeMutablePointer<UInt8>
        var count = 0
        var capacity: Int

        init(capacity: Int) {
            self.capacity = max(64, capacity)
            start = .allocate(capacity: self.capacity)
        }

        deinit { start.deallocate() }

        /// Room for `extra` more bytes.
        @inline(__always)
        func reserve(_ extra: Int) {
            if count + extra > capacity { grow(count + extra) }
        }

        private func grow(_ needed: Int) {
            var capacity = self.capacity * 2
            while capacity < needed { capacity *= 2 }
            let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            larger.update(from: start, count: count)
            start.deallocate()
            start = larger
            self.capacity = capacity
        }
    }

    private let storage: Storage

    init(capacity: Int = 512) {
        storage = Storage(capacity: capacity)
    }

    /// What has been written (one `memcpy`: `Array(UnsafeBufferPointer)` copied byte by byte).
    var bytes: [UInt8] {
        let count = storage.count, start = storage.start
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            buffer.baseAddress?.initialize(from: start, count: count)
            initialized = count
        }
    }

    /// How many bytes have been written.
    var count: Int { storage.count }

    /// Calls `body` with the bytes written from offset `start` on, in place.
    func withBytes<T>(from start: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        try body(UnsafeBufferPointer(start: storage.start + start, count: storage.count - start))
    }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { raw($0) }
    }

    mutating func raw(_ other: [UInt8]) {
        other.withUnsafeBufferPointer { raw($0) }
    }

    mutating func raw(_ other: UnsafeBufferPointer<UInt8>) {
        guard let base = other.baseAddress, other.count > 0 else { return }
        storage.reserve(other.count)
        (storage.start + storage.count).update(from: base, count: other.count)
        storage.count += other.count
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        storage.reserve(1)
        storage.start[storage.count] = value
        storage.count += 1
    }

    mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { string(utf8: $0) }
    }

    /// A string literal from UTF-8 bytes, escaped as the encoder escapes. Runs without
    /// anything to escape are found eight bytes at a time and copied at once.
    mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        byte(UInt8(ascii: "\""))
        var start = 0
        var index = 0
        let count = utf8.count
        let raw = UnsafeRawBufferPointer(utf8)
        while index < count {
            if index + 8 <= count, !Self.needsEscape(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) {
                index += 8
                continue
            }
            let byte = utf8[index]
            if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            self.raw(UnsafeBufferPointer(rebasing: utf8[start..<index]))
            escape(byte)
            index += 1
            start = index
        }
        self.raw(UnsafeBufferPointer(rebasing: utf8[start..<count]))
        byte(UInt8(ascii: "\""))
    }

    /// Whether any of the eight bytes is a control character, `"` or `\` (SWAR: a zero
    /// byte in `word ^ pattern`, or a byte below 0x20, sets that byte's high bit).
    @inline(__always)
    private static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
        let below20 = (word &- ones &* 0x20) & ~word & highs != 0
        return below20 || hasZero(word ^ (ones &* 0x22)) || hasZero(word ^ (ones &* 0x5C))
    }

    /// An RFC 3339 millisecond timestamp string.
    mutating func timestamp(milliseconds: Int64) {
        storage.reserve(Timestamp.maxFormattedLength + 2)
        storage.start[storage.count] = UInt8(ascii: "\"")
        storage.count += 1 + Timestamp.format(milliseconds: milliseconds, into: storage.start + storage.count + 1)
        storage.start[storage.count] = UInt8(ascii: "\"")
        storage.count += 1
    }

    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): raw("\\\"")
        case UInt8(ascii: "\\"): raw("\\\\")
        case 0x08: raw("\\b")
        case 0x0C: raw("\\f")
        case 0x0A: raw("\\n")
        case 0x0D: raw("\\r")
        case 0x09: raw("\\t")
        default:
            let hex: StaticString = "0123456789abcdef"
            raw("\\u00")
            hex.withUTF8Buffer { digits in
                self.byte(digits[Int(byte >> 4)])
                self.byte(digits[Int(byte & 0x0F)])
            }
        }
    }

    mutating func integer(_ value: Int64) {
        if value < 0 {
            guard value != .min else { return raw(Array(String(value).utf8)) }
            byte(UInt8(ascii: "-"))
            return integer(-value)
        }
        storage.reserve(20)
        var digits = 1
        var rest = UInt64(value) / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        rest = UInt64(value)
        var index = storage.count + digits
        repeat {
            index -= 1
            storage.start[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        } while rest > 0
        storage.count += digits
    }

    mutating func number(_ value: Double) {
        // Integral values print as integers, as the encoder prints them.
        if value.rounded() == value, abs(value) < 1e15, !(value == 0 && value.sign == .minus) {
            return integer(Int64(value))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        text.withUTF8 { raw($0) }
    }
}
