import Foundation

/// The identifier of a catalog resource: a server-generated UUID (version 7), written in lowercase.
public struct CatalogID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The canonical lowercase text, such as `4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2`.
    public let rawValue: String

    /// A new identifier: a version 7 UUID (RFC 9562), whose first 48 bits are the
    /// creation time in milliseconds and the rest random, so new ids sort after older
    /// ones and database indexes grow at their end.
    public init() {
        self.init(milliseconds: UInt64(max(0, Date().timeIntervalSince1970 * 1000)))
    }

    /// A version 7 UUID for the instant `milliseconds` after 1970.
    public init(milliseconds: UInt64) {
        var generator = SystemRandomNumberGenerator()
        let random: UInt64 = generator.next()
        let more: UInt64 = generator.next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> UInt64(40 - index * 8)) }
        for index in 6..<16 { bytes[index] = UInt8(truncatingIfNeeded: (index < 14 ? random : more) >> UInt64((index % 8) * 8)) }
        bytes[6] = bytes[6] & 0x0F | 0x70
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        rawValue = String(decoding: text, as: UTF8.self)
    }

    /// Parses the canonical 36-character form `8-4-4-4-12` hex digits (either case);
    /// `nil` for anything else.
    public init?(_ text: String) {
        var text = text
        var sawUppercase = false
        let valid = text.withUTF8 { utf8 -> Bool in
            guard utf8.count == 36 else { return false }
            for (index, byte) in utf8.enumerated() {
                let isDash = index == 8 || index == 13 || index == 18 || index == 23
                switch byte {
                case UInt8(ascii: "-"): guard isDash else { return false }
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): guard !isDash else { return false }
                case UInt8(ascii: "A")...UInt8(ascii: "F"):
                    guard !isDash else { return false }
                    sawUppercase = true
                default: return false
                }
            }
            return true
        }
        guard valid else { return nil }
        // The common case, already canonical, keeps the string as it is.
        rawValue = sawUppercase ? String(decoding: text.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "F") ? $0 | 0x20 : $0 }, as: UTF8.self) : text
    }

    /// The canonical lowercase text.
    public var description: String { rawValue }

    /// Orders identifiers by their text.
    public static func < (lhs: CatalogID, rhs: CatalogID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Decodes the canonical text form.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let id = CatalogID(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a UUID: \(text)")
        }
        self = id
    }

    /// Encodes the canonical lowercase text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
