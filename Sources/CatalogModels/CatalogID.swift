import Foundation

/// The identifier of a catalog resource: a server-generated UUID, written in lowercase.
public struct CatalogID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The canonical lowercase text, such as `4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2`.
    public let rawValue: String

    /// A new random identifier.
    public init() {
        rawValue = UUID().uuidString.lowercased()
    }

    /// Parses the canonical 36-character form (either case); `nil` for anything else.
    public init?(_ text: String) {
        guard text.utf8.count == 36, let uuid = UUID(uuidString: text) else { return nil }
        rawValue = uuid.uuidString.lowercased()
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
