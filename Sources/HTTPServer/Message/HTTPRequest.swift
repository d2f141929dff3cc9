/// A parsed HTTP request as handlers see it.
public struct HTTPRequest: Sendable {
    /// The request method.
    public let method: HTTPMethod
    /// The protocol version the client spoke.
    public let version: HTTPVersion
    /// The path as received, still percent-encoded (`/v1/games/abc`).
    public let path: String
    /// The query as received, without the `?` and still percent-encoded, or `nil` when absent.
    public let query: String?
    /// The header fields.
    public let headers: HTTPHeaders
    /// The body, decoded from its transfer coding; empty when there is none.
    public let body: [UInt8]
    /// The values captured by the route pattern's `{name}` segments, percent-decoded.
    public internal(set) var pathParameters: PathParameters = PathParameters()
    /// The peer's address, such as `127.0.0.1:53422`.
    public let remoteAddress: String
    /// The client address limits are kept under: the peer's IPv4 address, or its IPv6
    /// address's /64 (empty when unknown).
    public var clientAddress = ""
    /// What the route's admission check found from the head, for a request with a body
    /// (``Handler/admitting(_:)``); `nil` otherwise.
    public internal(set) var admitted: (any AnyObject & Sendable)?
    /// The request's id: the client's well-formed `X-Request-Id`, or one the server made.
    /// Every response carries it back in `X-Request-Id`.
    public internal(set) var requestID = ""

    /// Creates a request; the server does this after parsing, tests may too.
    public init(
        method: HTTPMethod, path: String, query: String? = nil, version: HTTPVersion = .http1_1,
        headers: HTTPHeaders = HTTPHeaders([]), body: [UInt8] = [], remoteAddress: String = ""
    ) {
        self.method = method
        self.version = version
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The query parameters in order, percent-decoded with `+` read as a space.
    /// - Throws: ``HTTPError`` (400) when a name or value does not decode to UTF-8.
    public func queryItems() throws(HTTPError) -> [QueryItem] {
        var items: [QueryItem] = []
        var valid = true
        forEachRawQueryPair { pair in
            guard valid, let name = pair.decodedName, let value = PercentDecoding.decode(pair.value, plusAsSpace: true) else {
                valid = false
                return
            }
            items.append(QueryItem(name: name, value: value))
        }
        guard valid else {
            throw HTTPError(.badRequest, code: "invalidQuery", detail: "The query string is not valid percent-encoded UTF-8.")
        }
        return items
    }

    /// Calls `body` with each non-empty `name=value` pair of the query, in order, as
    /// received: for reading parameters without decoding the whole query.
    public func forEachRawQueryPair(_ body: (RawQueryPair) -> Void) {
        guard var query else { return }
        query.withUTF8 { bytes in
            for pair in PercentDecoding.split(bytes, on: UInt8(ascii: "&")) where !pair.isEmpty {
                body(RawQueryPair(UnsafeBufferPointer(rebasing: pair)))
            }
        }
    }
}

/// One `name=value` pair of a query string as received, still percent-encoded; valid
/// only within the ``HTTPRequest/forEachRawQueryPair(_:)`` call that lends it.
public struct RawQueryPair {
    /// The whole pair, `name=value` (or `name` alone).
    public let bytes: UnsafeBufferPointer<UInt8>
    /// The name, before the first `=`.
    public let name: UnsafeBufferPointer<UInt8>
    /// The value, after the first `=` (empty when there is none).
    let value: UnsafeBufferPointer<UInt8>

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        let equals = bytes.firstIndex(of: UInt8(ascii: "=")) ?? bytes.endIndex
        name = UnsafeBufferPointer(rebasing: bytes[..<equals])
        value = UnsafeBufferPointer(rebasing: bytes[(equals == bytes.endIndex ? equals : equals + 1)...])
    }

    /// The name decoded as ``HTTPRequest/queryItems()`` decodes it; `nil` when it is not
    /// valid percent-encoded UTF-8.
    var decodedName: String? { PercentDecoding.decode(name, plusAsSpace: true) }

    /// Whether the name, decoded as ``HTTPRequest/queryItems()`` decodes it, is `text`:
    /// a name without escapes is compared as received.
    public func nameIs(_ text: String) -> Bool {
        if !name.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) { return name.elementsEqual(text.utf8) }
        return decodedName == text
    }
}

/// One `name=value` pair of a query string.
public struct QueryItem: Sendable, Hashable {
    /// The decoded name.
    public let name: String
    /// The decoded value; empty when the pair had no `=`.
    public let value: String

    /// Creates a query item.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// The named values a route pattern captured from the path.
public struct PathParameters: Sendable {
    private var pairs: [(name: String, value: String)] = []

    /// Creates an empty set of parameters.
    public init() {}

    mutating func append(name: String, value: String) {
        pairs.append((name, value))
    }

    /// The decoded value captured by `{name}`, or `nil` when the pattern has no such segment.
    public subscript(name: String) -> String? {
        pairs.first { $0.name == name }?.value
    }
}

/// Percent-decoding of path segments and query components (RFC 3986).
enum PercentDecoding {
    /// Decodes `%XX` escapes (and `+` as a space when asked) and requires valid UTF-8.
    static func decode(_ bytes: UnsafeBufferPointer<UInt8>, plusAsSpace: Bool) -> String? {
        // The common case, plain ASCII: the bytes are the string.
        if !bytes.contains(where: { $0 >= 0x80 || $0 == UInt8(ascii: "%") || (plusAsSpace && $0 == UInt8(ascii: "+")) }) {
            return String(decoding: bytes, as: UTF8.self)
        }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = ASCII.hexValue(bytes[index + 1]), let low = ASCII.hexValue(bytes[index + 2]) else {
                    return nil
                }
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(plusAsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return String(validating: output, as: UTF8.self)
    }

    /// The runs of `bytes` between each `separator` (empty ones included), without
    /// allocating.
    static func split(_ bytes: UnsafeBufferPointer<UInt8>, on separator: UInt8) -> Parts {
        Parts(bytes: bytes, separator: separator)
    }

    /// The runs ``split(_:on:)`` yields.
    struct Parts: Sequence, IteratorProtocol {
        let bytes: UnsafeBufferPointer<UInt8>
        let separator: UInt8
        private var start: Int? = 0

        init(bytes: UnsafeBufferPointer<UInt8>, separator: UInt8) {
            self.bytes = bytes
            self.separator = separator
        }

        mutating func next() -> Slice<UnsafeBufferPointer<UInt8>>? {
            guard let from = start else { return nil }
            guard let end = bytes[from...].firstIndex(of: separator) else {
                start = nil
                return bytes[from...]
            }
            start = end + 1
            return bytes[from..<end]
        }
    }
}
