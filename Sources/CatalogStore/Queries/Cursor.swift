import Foundation
import GRDB

/// An opaque list cursor: the sort key and id of the last item of a page, bound to the
/// request's order and filters by a fingerprint. base64url text.
struct Cursor {
    enum Key {
        case integer(Int64)
        case text(String)
        case real(Double)

        var databaseValue: any DatabaseValueConvertible {
            switch self {
            case let .integer(value): value
            case let .text(value): value
            case let .real(value): value
            }
        }

        init?(_ value: DatabaseValue) {
            switch value.storage {
            case let .int64(number): self = .integer(number)
            case let .double(number): self = .real(number)
            case let .string(text): self = .text(text)
            default: return nil
            }
        }
    }

    let fingerprint: String
    let key: Key
    let id: String

    private static let separator: Character = "\u{1F}"

    func encoded() -> String {
        let keyText: String = switch key {
        case let .integer(value): "i\(value)"
        case let .text(value): "s\(value)"
        case let .real(value): "d\(String(value.bitPattern, radix: 16))"
        }
        let plain = "1\(Self.separator)\(Self.hash(fingerprint))\(Self.separator)\(id)\(Self.separator)\(keyText)"
        return Data(plain.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Decodes `text` and checks it was made for a request with this fingerprint.
    init(decoding text: String, fingerprint: String) throws(StoreError) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard text.utf8.count <= 4096, let data = Data(base64Encoded: base64), let plain = String(data: data, encoding: .utf8) else {
            throw .invalidCursor("The cursor is malformed.")
        }
        let parts = plain.split(separator: Self.separator, maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "1", let kind = parts[3].first else { throw .invalidCursor("The cursor is malformed.") }
        guard parts[1] == Self.hash(fingerprint) else {
            throw .invalidCursor("The cursor belongs to a list with another sort or filter; start again without it.")
        }
        let value = parts[3].dropFirst()
        switch kind {
        case "i":
            guard let number = Int64(value) else { throw .invalidCursor("The cursor is malformed.") }
            key = .integer(number)
        case "s":
            key = .text(String(value))
        case "d":
            guard let bits = UInt64(value, radix: 16) else { throw .invalidCursor("The cursor is malformed.") }
            key = .real(Double(bitPattern: bits))
        default:
            throw .invalidCursor("The cursor is malformed.")
        }
        id = String(parts[2])
        self.fingerprint = fingerprint
    }

    init(fingerprint: String, key: Key, id: String) {
        self.fingerprint = fingerprint
        self.key = key
        self.id = id
    }

    private static func hash(_ text: String) -> String {
        String(SHA256.hex(Array(text.utf8)).prefix(12))
    }
}
