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
        var plain: [UInt8] = [UInt8(ascii: "1"), Self.separator]
        plain += Array(String(Self.hash(fingerprint), radix: 36).utf8)
        plain.append(Self.separator)
        plain += Array(id.utf8)
        plain.append(Self.separator)
        switch key {
        case let .integer(value): plain += Array("i\(value)".utf8)
        case let .text(value): plain += Array("s\(value)".utf8)
        case let .real(value): plain += Array("d\(String(value.bitPattern, radix: 16))".utf8)
        }
        return Base64URL.encode(plain)
    }

    /// Decodes `text` and checks it was made for a request with this fingerprint.
    init(decoding text: String, fingerprint: String) throws(StoreError) {
        guard text.utf8.count <= 4096, let plain = Base64URL.decode(text) else { throw .invalidCursor("The cursor is malformed.") }
        let parts = plain.split(separator: Self.separator, maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].elementsEqual([UInt8(ascii: "1")]), let kind = parts[3].first,
              let id = String(validating: parts[2], as: UTF8.self), let value = String(validating: parts[3].dropFirst(), as: UTF8.self)
        else { throw .invalidCursor("The cursor is malformed.") }
        guard parts[1].elementsEqual(String(Self.hash(fingerprint), radix: 36).utf8) else {
            throw .invalidCursor("The cursor belongs to a list with another sort or filter; start again without it.")
        }
        switch kind {
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
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let b0 = chunk[chunk.startIndex]
            let b1 = chunk.count > 1 ? chunk[chunk.startIndex + 1] : 0
            let b2 = chunk.count > 2 ? chunk[chunk.startIndex + 2] : 0
            output.append(alphabet[Int(b0 >> 2)])
            output.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            if chunk.count > 1 { output.append(alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)]) }
            if chunk.count > 2 { output.append(alphabet[Int(b2 & 0x3F)]) }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var output: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text.utf8 {
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
