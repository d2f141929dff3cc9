import CatalogStore
import HTTPServer

/// Entity tags: a resource's `ETag` is its version in quotes, such as `"3"`. Tags are
/// compared as text, so `"03"` or `"+3"` never match version 3.
enum ETag {
    static func header(_ version: Int) -> String { "\"\(version)\"" }

    /// Whether a `GET`'s `If-None-Match` (weak comparison) matches `version`.
    static func noneMatch(_ request: HTTPRequest, version: Int) throws(APIError) -> Bool {
        try tags(request, "If-None-Match", weakMatches: true)?.matches(version) ?? false
    }

    /// The `If-Match` (strong comparison) and `If-None-Match` (weak comparison)
    /// conditions of a write.
    static func preconditions(_ request: HTTPRequest) throws(APIError) -> WritePreconditions {
        WritePreconditions(ifMatch: try tags(request, "If-Match", weakMatches: false),
                           ifNoneMatch: try tags(request, "If-None-Match", weakMatches: true))
    }

    /// Parses every `name` field as `*` or a list of entity tags (RFC 9110 §8.8.3; a tag
    /// may contain commas); `nil` when absent. Weak tags (`W/"3"`) count only when `weakMatches`.
    private static func tags(_ request: HTTPRequest, _ name: String, weakMatches: Bool) throws(APIError) -> WritePreconditions.Tags? {
        let fields = request.headers.values(for: name)
        guard !fields.isEmpty else { return nil }
        let text = Array(fields.joined(separator: ",").utf8)
        let isSpace: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        if String(decoding: text.drop(while: isSpace).reversed().drop(while: isSpace).reversed(), as: UTF8.self) == "*" { return .any }
        var versions = Set<Int>()
        var index = 0
        var sawTag = false
        while index < text.count {
            // Separators: whitespace and empty list elements.
            if isSpace(text[index]) || text[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            var weak = false
            if text.count - index >= 2, text[index] == UInt8(ascii: "W"), text[index + 1] == UInt8(ascii: "/") {
                weak = true
                index += 2
            }
            guard index < text.count, text[index] == UInt8(ascii: "\"") else { throw malformed(name) }
            let start = index + 1
            guard let end = text[start...].firstIndex(of: UInt8(ascii: "\"")) else { throw malformed(name) }
            // etagc: %x21 / %x23-7E / obs-text.
            guard text[start..<end].allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) }) else { throw malformed(name) }
            index = end + 1
            while index < text.count, isSpace(text[index]) { index += 1 }
            guard index == text.count || text[index] == UInt8(ascii: ",") else { throw malformed(name) }
            sawTag = true
            // Only a canonical decimal names one of our versions.
            let opaque = String(decoding: text[start..<end], as: UTF8.self)
            if weak && !weakMatches { continue }
            if let version = Int(opaque), String(version) == opaque { versions.insert(version) }
        }
        guard sawTag else { throw malformed(name) }
        return .versions(versions)
    }

    private static func malformed(_ name: String) -> APIError {
        .invalidHeader(name, "expected * or a list of entity tags such as \"3\".")
    }
}
