/// The proxies whose forwarding fields (`Forwarded`, `X-Forwarded-For`) are believed, and
/// the client address those fields name.
public struct TrustedProxies: Sendable {
    /// Where a trusted proxy says whom it forwards for. Only the chosen one is read: a
    /// proxy passes the others on from its client unchanged, where anyone could write them.
    public enum Source: String, Sendable, CaseIterable {
        /// `X-Forwarded-For` (nginx's `$proxy_add_x_forwarded_for`), the default.
        case xForwardedFor = "x-forwarded-for"
        /// `Forwarded` (RFC 7239), its `for=` parameters.
        case forwarded
        /// A PROXY protocol version 2 header before anything else on each connection.
        case proxyProtocol = "proxy-protocol"
    }

    /// The networks a trusted proxy connects from.
    public let networks: [IPNetwork]
    /// Where those proxies give the client's address.
    public var source: Source

    /// Trusts proxies connecting from `networks`, reading the client's address from `source`.
    public init(_ networks: [IPNetwork], source: Source = .xForwardedFor) {
        self.networks = networks
        self.source = source
    }

    /// A list item that is not a network.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        /// The item as written (trimmed), empty for an empty item.
        public let item: String

        /// A sentence naming the item.
        public var description: String {
            item.isEmpty ? "The trusted proxy list has an empty item." : "\"\(item)\" is not an IP address or network."
        }
    }

    /// The proxies of a comma-separated list of networks (`10.0.0.0/8, ::1`), spaces
    /// around items allowed; an error naming the first item that is empty or not a network.
    public static func parse(_ list: String) -> Result<TrustedProxies, ParseError> {
        var networks: [IPNetwork] = []
        for item in list.split(separator: ",", omittingEmptySubsequences: false) {
            let text = String(item.trimmingSpace())
            guard let network = IPNetwork(text) else { return .failure(ParseError(item: text)) }
            networks.append(network)
        }
        return .success(TrustedProxies(networks))
    }

    /// Whether `address` is a trusted proxy's.
    public func trusts(_ address: IPAddress) -> Bool {
        networks.contains { $0.contains(address) }
    }

    /// At most this many field bytes are read, and this many of the right-most hops walked.
    static let maxFieldBytes = 8192, maxHops = 64

    /// The client that a trusted `peer` forwards for, from the field values of `Forwarded`
    /// (RFC 7239's `for=`) or of `X-Forwarded-For`, whichever the caller passes (the one
    /// ``source`` names), in the order received.
    ///
    /// The hops are walked from the right (the nearest), skipping trusted proxies; the first
    /// other hop is the client, or the left-most hop when all are trusted. Nil means no
    /// client is named: the peer is not trusted, there are no hops, the fields are malformed
    /// or longer than 8 KiB, or the client hop is `unknown`, obfuscated or not an address.
    /// A client can cause nil at will, so the connection counts such requests under a key
    /// of their own, never under the proxy's address.
    func forwardedClient(peer: IPAddress, forwarded: [String], xForwardedFor: [String]) -> IPAddress? {
        guard trusts(peer) else { return nil }
        let fields = forwarded.isEmpty ? xForwardedFor : forwarded
        guard fields.reduce(0, { $0 + $1.utf8.count }) <= Self.maxFieldBytes else { return nil }
        var hops: [IPAddress?] = []
        for value in fields {
            guard let more = forwarded.isEmpty ? Self.xForwardedForHops(value) : Self.forwardedHops(value) else { return nil }
            hops += more
        }
        let considered = hops.suffix(Self.maxHops)
        for hop in considered.reversed() {
            guard let address = hop else { return nil }
            if !trusts(address) { return address }
        }
        return considered.first ?? nil
    }

    /// The hops of one `X-Forwarded-For` value (empty items skipped): `v4`, `v4:port`,
    /// `v6`, `[v6]` or `[v6]:port`, and a nil hop for an item that is none of these (what
    /// a client wrote to the left of what its proxy appended matters only if reached).
    private static func xForwardedForHops(_ value: String) -> [IPAddress?]? {
        var hops: [IPAddress?] = []
        for item in value.split(separator: ",", omittingEmptySubsequences: false) {
            let entry = item.trimmingSpace()
            if entry.isEmpty { continue }
            if let (host, port) = hostAndPort(entry, bareIPv6: true), port.map(isPort) ?? true, let address = IPAddress(host) {
                hops.append(address)
            } else {
                hops.append(nil)
            }
        }
        return hops
    }

    /// The hops of one `Forwarded` value (RFC 7239): the `for=` node of each element, nil
    /// for `unknown`, an obfuscated node or an element without `for=`; nil if malformed.
    private static func forwardedHops(_ value: String) -> [IPAddress?]? {
        var scanner = ForwardedScanner(bytes: Array(value.utf8))
        var hops: [IPAddress?] = []
        repeat {
            guard let pairs = scanner.element() else { return nil }
            if pairs.isEmpty { continue }  // an empty list element
            guard Set(pairs.map(\.name)).count == pairs.count else { return nil }
            guard let node = pairs.first(where: { $0.name == "for" })?.value else {
                hops.append(nil)
                continue
            }
            guard let hop = forwardedNode(node) else { return nil }
            hops.append(hop)
        } while scanner.skip(UInt8(ascii: ","))
        return hops
    }

    /// A `for=` node: `.some(address)` for an address with an optional port (IPv6 in
    /// brackets), `.some(nil)` for `unknown` or an obfuscated `_name`, nil if malformed.
    private static func forwardedNode(_ node: String) -> IPAddress?? {
        guard let (name, port) = hostAndPort(node[...], bareIPv6: false) else { return nil }
        if let port, !isPort(port), !isObfuscated(port) { return nil }
        if let address = IPAddress(name) { return .some(address) }
        return name.lowercased() == "unknown" || isObfuscated(name) ? .some(nil) : nil
    }

    /// The host and port of `[host]`, `[host]:port`, `host` or `host:port`; a bracketed
    /// host must hold a colon. With `bareIPv6`, text with several colons is a bare host.
    private static func hostAndPort(_ text: Substring, bareIPv6: Bool) -> (host: Substring, port: Substring?)? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let host = text[text.index(after: text.startIndex)..<close], rest = text[text.index(after: close)...]
            guard host.contains(":"), rest.isEmpty || rest.hasPrefix(":") else { return nil }
            return (host, rest.isEmpty ? nil : rest.dropFirst())
        }
        let colons = text.count { $0 == ":" }
        if colons == 0 || (bareIPv6 && colons > 1) { return (text, nil) }
        guard colons == 1, let colon = text.firstIndex(of: ":") else { return nil }
        return (text[..<colon], text[text.index(after: colon)...])
    }

    private static func isPort(_ text: Substring) -> Bool {
        (1...5).contains(text.utf8.count) && text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// Whether `text` is an obfuscated identifier: `_` and letters, digits, `.`, `_`, `-`.
    private static func isObfuscated(_ text: Substring) -> Bool {
        text.utf8.count > 1 && text.hasPrefix("_")
            && text.utf8.allSatisfy { byte in
                ForwardedScanner.isAlphanumeric(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }
}

/// Reads the elements of a `Forwarded` field value: `;`-separated `name=value` pairs
/// (a token or a quoted string), with optional white space around pairs.
private struct ForwardedScanner {
    let bytes: [UInt8]
    var index = 0

    /// Consumes `byte` if it is next.
    mutating func skip(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// The pairs of the element at the scanner (names lowercased; empty for an empty
    /// element), left before the `,` or the end that follows it; nil if malformed.
    mutating func element() -> [(name: String, value: String)]? {
        var pairs: [(name: String, value: String)] = []
        repeat {
            skipSpace()
            if index < bytes.count, bytes[index] != UInt8(ascii: ","), bytes[index] != UInt8(ascii: ";") {
                let name = token().lowercased()
                guard !name.isEmpty, skip(UInt8(ascii: "=")) else { return nil }
                guard let value = index < bytes.count && bytes[index] == UInt8(ascii: "\"") ? quoted() : token(),
                    !value.isEmpty
                else { return nil }
                pairs.append((name, value))
                skipSpace()
            }
        } while skip(UInt8(ascii: ";"))
        return index == bytes.count || bytes[index] == UInt8(ascii: ",") ? pairs : nil
    }

    private mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
    }

    private mutating func token() -> String {
        let start = index
        while index < bytes.count, Self.isTokenByte(bytes[index]) { index += 1 }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// A quoted string's content with its backslash escapes undone; nil if unterminated
    /// or holding a control character.
    private mutating func quoted() -> String? {
        var content: [UInt8] = []
        index += 1
        while index < bytes.count {
            var byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { return String(decoding: content, as: UTF8.self) }
            if byte == UInt8(ascii: "\\") {
                guard index < bytes.count else { return nil }
                byte = bytes[index]
                index += 1
            }
            guard byte == 0x09 || (byte >= 0x20 && byte != 0x7F) else { return nil }
            content.append(byte)
        }
        return nil
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

extension Substring {
    /// The text without its leading and trailing spaces and tabs.
    fileprivate func trimmingSpace() -> Substring {
        let isSpace = { (character: Character) in character == " " || character == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        return self[first...last]
    }
}
