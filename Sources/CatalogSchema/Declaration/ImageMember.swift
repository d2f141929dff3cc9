import CatalogModels

/// The `image` member of a document as the store keeps it: the compact JSON of an
/// ``ImageReference``, keys sorted (as every rendering sorts them), written by the server
/// and read back from import records, whose every member is checked.
package enum ImageMember {
    /// The path images are served under; an image's `url` is this and its hash.
    package static let path = "/v1/images/"

    /// The JSON kept for `reference`.
    package static func json(_ reference: ImageReference) -> String {
        "{\"blurHash\":\"\(reference.blurHash)\",\"contentType\":\"\(reference.contentType)\",\"height\":\(reference.height),"
            + "\"url\":\"\(reference.url)\",\"width\":\(reference.width)}"
    }

    /// The reference `members` (an import record's) describe, as kept; `nil` unless every
    /// member is there, of the right type and within its rule, and no other is.
    package static func read(_ members: [String: JSONValue], at pointer: String) -> String? {
        guard Set(members.keys) == ["url", "width", "height", "blurHash", "contentType"],
            case let .string(url)? = members["url"], url.hasPrefix(path), isHash(url.dropFirst(path.count)),
            case let .number(width)? = members["width"], case let .number(height)? = members["height"],
            width.rounded() == width, height.rounded() == height, (1...65535).contains(width), (1...65535).contains(height),
            case let .string(blurHash)? = members["blurHash"], (6...100).contains(blurHash.utf8.count), blurHash.utf8.allSatisfy(isBase83),
            case let .string(contentType)? = members["contentType"], ImageFormat(contentType: contentType)?.contentType == contentType
        else { return nil }
        return json(ImageReference(url: url, width: Int(width), height: Int(height), blurHash: blurHash, contentType: contentType))
    }

    /// The hash of the image whose kept JSON is `json` (``json(_:)``), if it names one.
    package static func hash(stored json: String) -> String? {
        guard let start = json.range(of: "\"url\":\"" + path) else { return nil }
        let hash = json[start.upperBound...].prefix(64)
        return isHash(hash) ? String(hash) : nil
    }

    /// Why an image member was refused.
    package static let invalid = Violation(
        .invalidFormat, "Must be an image as documents show it: url (/v1/images/ and a SHA-256), width, height, blurHash and contentType.")

    /// Whether `text` is a SHA-256 in lowercase hex. (Concrete, not generic over
    /// `StringProtocol`: every image request checks one, and a generic call from another
    /// module walks the bytes through witness tables, some 25,000 instructions.)
    package static func isHash(_ text: String) -> Bool {
        isHash(text.utf8)
    }

    /// Whether `text` is a SHA-256 in lowercase hex.
    package static func isHash(_ text: Substring) -> Bool {
        isHash(text.utf8)
    }

    private static func isHash(_ bytes: some Collection<UInt8>) -> Bool {
        guard bytes.count == 64 else { return false }
        for byte in bytes where !((0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)) { return false }
        return true
    }

    private static func isBase83(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || Array("#$%*+,-.:;=?@[]^_{|}~".utf8).contains(byte)
    }
}
