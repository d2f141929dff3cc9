import CatalogStore
import HTTPServer

/// Entity tags: a resource's `ETag` is its version in quotes, such as `"3"`. A
/// representation shaped by `include` or `fields` is tagged `"3-<digest of the body>"`,
/// so its tag changes when anything embedded changes; an answer that depends on its
/// caller is tagged per viewer the same way (``Caching``). Tags are compared as text, so
/// `"03"` or `"+3"` never match version 3; writes (`If-Match`) compare versions only: the
/// canonical number a strong tag starts with, before a `-` (`"3"`, `"3-…"`).
enum ETag {
    static func header(_ version: Int) -> String { "\"\(version)\"" }

    /// The tag of a representation shaped by `include` or `fields`: the version and a
    /// 64-bit digest of the body.
    static func header(_ version: Int, body: [UInt8]) -> String {
        tag(prefix: Substring(String(version)), digest: Digest.of(body), weak: false)
    }

    /// `"<prefix>-<16 hex digits>"` (`"<16 hex digits>"` without a prefix), weak (`W/"…"`)
    /// or strong, written in one buffer.
    static func tag(prefix: Substring = "", digest: UInt64, weak: Bool) -> String {
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 20 + prefix.utf8.count + 1) { buffer in
            var count = 0
            func put(_ byte: UInt8) {
                buffer[count] = byte
                count += 1
            }
            if weak {
                put(UInt8(ascii: "W"))
                put(UInt8(ascii: "/"))
            }
            put(UInt8(ascii: "\""))
            if !prefix.isEmpty {
                for byte in prefix.utf8 { put(byte) }
                put(UInt8(ascii: "-"))
            }
            var shift: UInt64 = 64
            while shift > 0 {
                shift -= 4
                put(digits.utf8Start[Int((digest >> shift) & 0xF)])
            }
            put(UInt8(ascii: "\""))
            return count
        }
    }

    /// Whether a `GET`'s `If-None-Match` (weak comparison) lists the tag `header` (strong or
    /// weak), in either content coding (``Compression``: the same content).
    static func noneMatch(_ fields: [String], tag header: String) throws(APIError) -> Bool {
        guard let listed = try tags(fields, "If-None-Match", weakMatches: true) else { return false }
        let opaque = String(header.dropFirst(header.hasPrefix("W/") ? 3 : 1).dropLast())
        return listed.any || listed.opaque.contains(opaque) || listed.opaque.contains(opaque + Compression.suffix)
    }

    /// The `If-Match` (strong comparison) and `If-None-Match` (weak comparison)
    /// conditions of a write.
    static func preconditions(_ request: HTTPRequest) throws(APIError) -> WritePreconditions {
        WritePreconditions(
            ifMatch: try tags(request.headers.values(for: "If-Match"), "If-Match", weakMatches: false).map(versions),
            ifNoneMatch: try tags(request.headers.values(for: "If-None-Match"), "If-None-Match", weakMatches: true).map(versions))
    }

    /// The versions a list of tags names: the canonical decimal each starts with, alone or
    /// before a `-` (a shaped or per-viewer tag names the version it was made from).
    private static func versions(_ listed: (any: Bool, opaque: Set<String>)) -> WritePreconditions.Tags {
        if listed.any { return .any }
        return .versions(
            Set(
                listed.opaque.compactMap { text in
                    let number = text.prefix { $0 != "-" }
                    return Int(number).flatMap { String($0) == number ? $0 : nil }
                }))
    }

    /// Parses every `name` field as `*` or a list of entity tags (RFC 9110 §8.8.3; a tag
    /// may contain commas) into their opaque texts; `nil` when absent. Weak tags (`W/"3"`)
    /// count only when `weakMatches`.
    private static func tags(_ fields: [String], _ name: String, weakMatches: Bool) throws(APIError) -> (any: Bool, opaque: Set<String>)? {
        guard !fields.isEmpty else { return nil }
        let text = Array(fields.joined(separator: ",").utf8)
        let isSpace: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        if String(decoding: text.drop(while: isSpace).reversed().drop(while: isSpace).reversed(), as: UTF8.self) == "*" { return (true, []) }
        var opaque = Set<String>()
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
            if weak && !weakMatches { continue }
            opaque.insert(String(decoding: text[start..<end], as: UTF8.self))
        }
        guard sawTag else { throw malformed(name) }
        return (false, opaque)
    }

    private static func malformed(_ name: String) -> APIError {
        .invalidHeader(name, "expected * or a list of entity tags such as \"3\".")
    }
}
