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
    private static let textTypes: [StaticString] = ["application/json", "application/problem+json", "application/yaml", "application/x-ndjson", "text/"]

    /// Whether `response` would be compressed for a client accepting gzip (read on every
    /// answer to a read: no string is made).
    static func isEligible(_ response: borrowing HTTPResponse) -> Bool {
        guard response.status == .ok, response.file == nil, response.stream == nil, response.body.count > minimumBytes else { return false }
        guard let type = response.headers.first(where: { ASCII.startsIgnoringCase($0.name, "content-type", whole: true) })?.value else { return false }
        return textTypes.contains { ASCII.startsIgnoringCase(type, $0, whole: false) }
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
