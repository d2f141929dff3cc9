/// An opaque list cursor: the sort key and id of the last item of a page, bound to the
/// request's order and filters by a fingerprint hash. base64url text, no padding.
struct ListCursor {
    enum Key {
        case integer(Int64)
        case text(String)
        case real(Double)

        var sqlValue: SQLValue {
            switch self {
            case let .integer(value): .integer(value)
            case let .text(value): .text(value)
            case let .real(value): .real(value)
            }
        }

        /// The key a column holds; `nil` for NULL or a blob.
        init?(_ value: SQLValue) {
            switch value {
            case let .integer(number): self = .integer(number)
            case let .real(number): self = .real(number)
            case let .text(text): self = .text(text)
            case .null, .blob: return nil
            }
        }
    }

    let fingerprint: String
    let key: Key
    let id: String

    private static let separator = UInt8(0x1F)

    init(fingerprint: String, key: Key, id: String) {
        self.fingerprint = fingerprint
        self.key = key
        self.id = id
    }

    /// `1 ␟ fingerprint-hash ␟ id ␟ kind+value`, base64url-encoded.
    func encoded() -> String {
        var plain: [UInt8] = []
        plain.reserveCapacity(64 + id.utf8.count)
        plain.append(UInt8(ascii: "1"))
        plain.append(Self.separator)
        Self.appendBase36(Self.hash(fingerprint), to: &plain)
        plain.append(Self.separator)
        plain += id.utf8
        plain.append(Self.separator)
        switch key {
        case let .integer(value):
            plain.append(UInt8(ascii: "i"))
            plain += String(value).utf8
        case let .text(value):
            plain.append(UInt8(ascii: "s"))
            plain += value.utf8
        case let .real(value):
            plain.append(UInt8(ascii: "d"))
            plain += String(value.bitPattern, radix: 16).utf8
        }
        return Base64URL.encode(plain)
    }

    /// Decodes `text` and checks it was made for a request with this fingerprint.
    init(decoding text: String, fingerprint: String) throws(StoreError) {
        guard text.utf8.count <= 4096, let plain = Base64URL.decode(text) else { throw .invalidCursor("The cursor is malformed.") }
        // Four fields: the version, the fingerprint's hash, the id, and the key (which may
        // itself hold the separator).
        guard let first = plain.firstIndex(of: Self.separator),
            let second = plain[(first + 1)...].firstIndex(of: Self.separator),
            let third = plain[(second + 1)...].firstIndex(of: Self.separator),
            plain[..<first].elementsEqual([UInt8(ascii: "1")]), third + 1 < plain.count,
            let id = String(validating: plain[(second + 1)..<third], as: UTF8.self),
            let value = String(validating: plain[(third + 2)...], as: UTF8.self)
        else { throw .invalidCursor("The cursor is malformed.") }
        var hash: [UInt8] = []
        Self.appendBase36(Self.hash(fingerprint), to: &hash)
        guard plain[(first + 1)..<second].elementsEqual(hash) else {
            throw .invalidCursor("The cursor belongs to a list with another sort or filter; start again without it.")
        }
        switch plain[third + 1] {
        case UInt8(ascii: "i"):
            guard let number = Int64(value) else { throw .invalidCursor("The cursor is malformed.") }
            key = .integer(number)
        case UInt8(ascii: "s"):
            key = .text(value)
        case UInt8(ascii: "d"):
            guard let bits = UInt64(value, radix: 16) else { throw .invalidCursor("The cursor is malformed.") }
            key = .real(Double(bitPattern: bits))
        default:
            throw .invalidCursor("The cursor is malformed.")
        }
        self.id = id
        self.fingerprint = fingerprint
    }

    /// FNV-1a: binds a cursor to its list; not a secret (cursors are opaque, not signed).
    private static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// `value` in lowercase base 36, as `String(value, radix: 36)` writes it.
    private static func appendBase36(_ value: UInt64, to bytes: inout [UInt8]) {
        // At most 13 digits (36^13 > 2^64), written from the last.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 13) { digits in
            var first = digits.count
            var rest = value
            repeat {
                let digit = UInt8(rest % 36)
                first -= 1
                digits[first] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                rest /= 36
            } while rest > 0
            bytes += digits[first...]
        }
    }
}

/// RFC 4648 §5 base64url without padding.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        bytes.withUnsafeBufferPointer { append($0, to: &output) }
        return String(decoding: output, as: UTF8.self)
    }

    /// Appends the encoding of `bytes` to `output` (no padding).
    static func append(_ bytes: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        let count = bytes.count
        output.reserveCapacity(output.count + (count * 4 + 2) / 3)
        alphabet.withUnsafeBufferPointer { alphabet in
            var index = 0
            while index < count {
                let b0 = bytes[index]
                let b1 = index + 1 < count ? bytes[index + 1] : 0
                let b2 = index + 2 < count ? bytes[index + 2] : 0
                output.append(alphabet[Int(b0 >> 2)])
                output.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
                if index + 1 < count { output.append(alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)]) }
                if index + 2 < count { output.append(alphabet[Int(b2 & 0x3F)]) }
                index += 3
            }
        }
    }

    static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { input in
            values.withUnsafeBufferPointer { values in
                var output: [UInt8] = []
                output.reserveCapacity(input.count * 3 / 4)
                var accumulator: UInt32 = 0
                var bits = 0
                for byte in input {
                    let value = values[Int(byte)]
                    guard value != 0xFF else { return nil }
                    accumulator = accumulator << 6 | UInt32(value)
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                    }
                }
                // Leftover bits must be zero padding of fewer than 6 bits.
                guard bits < 6, accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
                return output
            }
        }
    }
}
