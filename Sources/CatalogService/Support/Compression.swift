import CatalogStore
import HTTPServer

/// Answers in gzip (RFC 9110 §8.4) for clients that accept it, as URLSession always does:
/// a `200` to a `GET` or `HEAD` whose body is over 1 KiB of text (JSON, problem details,
/// YAML, plain text), at zlib's level 4. Each such answer says `Vary: Accept-Encoding`,
/// compressed or not, so no cache serves one coding to a client that asked for the other;
/// a compressed one says `Content-Encoding: gzip` and its tag gains `-gzip`
/// (`"3-gzip"`: another representation, another tag; a write's `If-Match` still names
/// version 3, and `If-None-Match` matches either coding's tag).
///
/// Bodies answered before come out of ``CompressedCopies`` (keyed by their digest and
/// compared byte for byte): a kept list page, the contract or a repeated feed page is
/// compressed once. Media files and streams are sent as they are.
///
/// Never beside a secret (BREACH): secrets are shown once, in the answers to the writes
/// that make them (an API key, a webhook's signing secret), and no write's answer is
/// compressed; no `GET` answer holds a secret.
enum Compression {
    /// The smallest body compressed: below it the saving is a few bytes of a packet.
    static let minimumBytes = 1_024
    /// The compressed copies of the process's answers (4 MiB of both codings).
    static let copies = CompressedCopies()

    /// The media types compressed (their prefixes, lowercase).
    private static let textTypes = ["application/json", "application/problem+json", "application/yaml", "application/x-ndjson", "text/"]

    /// Whether `response` would be compressed for a client accepting gzip (read on every
    /// answer to a read: no string is made).
    static func isEligible(_ response: borrowing HTTPResponse) -> Bool {
        guard response.status == .ok, response.file == nil, response.stream == nil, response.body.count > minimumBytes else { return false }
        guard let type = response.headers.first(where: { startsIgnoringCase($0.name, "content-type", whole: true) })?.value else { return false }
        return textTypes.contains { startsIgnoringCase(type, $0, whole: false) }
    }

    /// Whether `text` starts with `prefix` (lowercase ASCII) in any case; with `whole`, is
    /// it. Compared over the strings' contiguous bytes where they have them (native
    /// strings do): iterating two UTF-8 views in step cost 3,600 instructions a list page.
    private static func startsIgnoringCase(_ text: String, _ prefix: String, whole: Bool) -> Bool {
        func starts(_ text: UnsafeBufferPointer<UInt8>, _ prefix: UnsafeBufferPointer<UInt8>) -> Bool {
            guard whole ? text.count == prefix.count : text.count >= prefix.count else { return false }
            for index in 0..<prefix.count {
                let byte = text[index]
                guard (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == prefix[index] else { return false }
            }
            return true
        }
        let fast = text.utf8.withContiguousStorageIfAvailable { text in prefix.utf8.withContiguousStorageIfAvailable { starts(text, $0) } }
        if let fast, let result = fast { return result }
        let bytes = Array(text.utf8), wanted = Array(prefix.utf8)
        return bytes.withUnsafeBufferPointer { bytes in wanted.withUnsafeBufferPointer { starts(bytes, $0) } }
    }

    /// Adds `Accept-Encoding` to the response's `Vary` (one field).
    static func vary(_ response: inout HTTPResponse) {
        if let index = response.headers.firstIndex(where: { $0.name == "Vary" }) {
            response.headers[index].value += ", Accept-Encoding"
        } else {
            response.headers.append(("Vary", "Accept-Encoding"))
        }
    }

    /// The finished answer to an eligible read, for a client that accepts gzip: a `200` in
    /// gzip (its body, `Content-Encoding` and tag; as it was when zlib fails), a `304`
    /// with the tag the `200` would have.
    static func gzip(_ response: inout HTTPResponse) {
        if response.status == .ok {
            guard let compressed = copies.gzip(response.body, digest: Digest.of(response.body)) else { return }
            response.body = compressed
            response.headers.append(("Content-Encoding", "gzip"))
        }
        if let index = response.headers.firstIndex(where: { $0.name == "ETag" }) {
            response.headers[index].value = codedTag(response.headers[index].value)
        }
    }

    /// The tag of the gzip coding of the representation tagged `tag`.
    static func codedTag(_ tag: String) -> String {
        tag.hasSuffix("\"") ? String(tag.dropLast()) + suffix + "\"" : tag
    }

    /// What a coded tag ends with, inside its quotes.
    static let suffix = "-gzip"
}
