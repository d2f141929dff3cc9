/// An IPv4 or IPv6 address. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is held as
/// the IPv4 address it maps, so a client is the same whichever socket family it came on.
public struct IPAddress: Sendable, Hashable {
    /// 4 bytes for IPv4, 16 for IPv6, in network order.
    let bytes: [UInt8]

    /// The address written as `text`: dotted IPv4 (four decimal parts 0–255, no leading
    /// zeros) or IPv6 text (RFC 4291, with `::` and an IPv4 tail); nil for anything else,
    /// a zone (`fe80::1%eth0`), a port or brackets included.
    public init?(_ text: some StringProtocol) {
        guard let bytes = Self.parse(text) else { return nil }
        self.init(bytes: bytes)
    }

    /// The address of 4 or 16 raw bytes in network order; nil for any other count.
    init?(bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = Self.isMapped(bytes) ? Array(bytes.suffix(4)) : bytes
    }

    /// Whether this is an IPv4 address (or was an IPv4-mapped IPv6 one).
    var isIPv4: Bool { bytes.count == 4 }

    /// The key connections are counted under: an IPv4 address whole, an IPv6 address by
    /// its /64 (each of its first 8 bytes in hex, the format the server has always used).
    var clientKey: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        return bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// The first 12 bytes of an IPv4-mapped IPv6 address.
    static let mappedPrefix: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]

    static func isMapped(_ bytes: [UInt8]) -> Bool {
        bytes.count == 16 && bytes.prefix(12).elementsEqual(mappedPrefix)
    }

    /// The raw bytes `text` spells (4 or 16, a mapped address left as 16); nil if malformed.
    static func parse(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8.prefix(46))  // the longest IPv6 text has 45 characters
        guard utf8.count <= 45 else { return nil }
        return utf8.contains(UInt8(ascii: ":")) ? parseIPv6(utf8[...]) : parseIPv4(utf8[...])
    }

    private static func parseIPv4(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        var bytes: [UInt8] = []
        for part in text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard bytes.count < 4, let value = decimal(part, maxDigits: 3), value <= 255 else { return nil }
            bytes.append(UInt8(value))
        }
        return bytes.count == 4 ? bytes : nil
    }

    private static func parseIPv6(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        let colon = UInt8(ascii: ":")
        let gap = text.indices.dropLast().first { text[$0] == colon && text[$0 + 1] == colon }
        var groups: [UInt16]
        if let gap {
            guard let head = groups16(text[..<gap], ipv4Tail: false),
                  let tail = groups16(text[(gap + 2)...], ipv4Tail: true),
                  head.count + tail.count <= 7 else { return nil }
            groups = head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        } else {
            guard let all = groups16(text, ipv4Tail: true), all.count == 8 else { return nil }
            groups = all
        }
        return groups.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    /// The 16-bit groups of colon-separated hex text, an IPv4 tail counting as two.
    private static func groups16(_ text: ArraySlice<UInt8>, ipv4Tail: Bool) -> [UInt16]? {
        guard !text.isEmpty else { return [] }
        let parts = text.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        var groups: [UInt16] = []
        for (index, part) in parts.enumerated() {
            if ipv4Tail, index == parts.count - 1, part.contains(UInt8(ascii: ".")) {
                guard let v4 = parseIPv4(part) else { return nil }
                groups += [UInt16(v4[0]) << 8 | UInt16(v4[1]), UInt16(v4[2]) << 8 | UInt16(v4[3])]
            } else {
                guard (1...4).contains(part.count), groups.count < 8 else { return nil }
                var value: UInt16 = 0
                for byte in part {
                    guard let digit = hexDigit(byte) else { return nil }
                    value = value << 4 | UInt16(digit)
                }
                groups.append(value)
            }
        }
        return groups
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A decimal of 1 to `maxDigits` ASCII digits without a leading zero ("0" itself aside).
    static func decimal(_ text: some Collection<UInt8>, maxDigits: Int) -> Int? {
        guard (1...maxDigits).contains(text.count), text.first != UInt8(ascii: "0") || text.count == 1 else { return nil }
        var value = 0
        for byte in text {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }
}

extension IPAddress: CustomStringConvertible {
    /// The address's canonical text: dotted IPv4, or IPv6 in lowercase hex with the
    /// longest run of two or more zero groups (the first of equals) written `::` (RFC 5952).
    public var description: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        let groups = (0..<8).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
        var best = (start: 0, count: 0), run = (start: 0, count: 0)
        for (index, group) in groups.enumerated() {
            run = group == 0 ? (run.count == 0 ? index : run.start, run.count + 1) : (0, 0)
            if run.count > best.count { best = run }
        }
        let hex = groups.map { String($0, radix: 16) }
        guard best.count >= 2 else { return hex.joined(separator: ":") }
        return hex[..<best.start].joined(separator: ":") + "::" + hex[(best.start + best.count)...].joined(separator: ":")
    }
}

/// A range of addresses in CIDR notation: `10.0.0.0/8`, `fd00::/8`, `::1/128`.
public struct IPNetwork: Sendable, Hashable {
    /// The network's address with the host bits cleared (4 or 16 bytes).
    let bytes: [UInt8]
    /// How many leading bits an address must share with `bytes`.
    let prefixLength: Int

    /// The network written as `text`: an address and `/` with a prefix length of at most
    /// 32 (IPv4) or 128 (IPv6), or a bare address (one host). Host bits may be set; they
    /// are ignored. `::ffff:a.b.c.d/n` with n ≥ 96 is the IPv4 network `a.b.c.d/(n - 96)`.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard var bytes = IPAddress.parse(parts[0]) else { return nil }
        var length = bytes.count * 8
        if parts.count == 2 {
            guard let given = IPAddress.decimal(parts[1].utf8, maxDigits: 3), given <= length else { return nil }
            length = given
        }
        if IPAddress.isMapped(bytes), length >= 96 {
            bytes = Array(bytes.suffix(4))
            length -= 96
        }
        self.prefixLength = length
        self.bytes = bytes.indices.map { bytes[$0] & Self.mask(byte: $0, prefixLength: length) }
    }

    /// Whether `address` is in the network. An IPv6 network holds an IPv4 address when
    /// it holds the address's IPv4-mapped form.
    func contains(_ address: IPAddress) -> Bool {
        var candidate = address.bytes
        if bytes.count == 16, candidate.count == 4 { candidate = IPAddress.mappedPrefix + candidate }
        guard candidate.count == bytes.count else { return false }
        return bytes.indices.allSatisfy { candidate[$0] & Self.mask(byte: $0, prefixLength: prefixLength) == bytes[$0] }
    }

    private static func mask(byte index: Int, prefixLength: Int) -> UInt8 {
        let bits = min(max(prefixLength - index * 8, 0), 8)
        return UInt8(truncatingIfNeeded: 0xFF00 >> bits)
    }
}

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
        text.utf8.count > 1 && text.hasPrefix("_") && text.utf8.allSatisfy { byte in
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
                      !value.isEmpty else { return nil }
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

/// The PROXY protocol (HAProxy's), with which a load balancer passing TCP through tells
/// the server the address of the client it accepted.
enum ProxyProtocol {
    /// What the bytes at the start of a connection hold.
    enum V2Result: Equatable {
        /// A prefix of a header: read more.
        case needMore
        /// No version 2 header, or a malformed one.
        case invalid
        /// A header of `length` bytes naming `source`, nil for LOCAL or a family without
        /// an IP address (the connection's own peer is the client then).
        case header(length: Int, source: IPAddress?)
    }

    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    /// The longest address block accepted after the 16 fixed bytes.
    static let maxBlockLength = 2048

    /// Reads a version 2 header from the start of `bytes`: the signature, the version and
    /// command (LOCAL or PROXY), the family and transport, the block's length, then the
    /// block, whose source address is read for PROXY over IPv4 or IPv6.
    static func parseV2(_ bytes: UnsafeRawBufferPointer) -> V2Result {
        for (byte, expected) in zip(bytes, signature) where byte != expected { return .invalid }
        if bytes.count > 12 {
            guard bytes[12] >> 4 == 0x2, bytes[12] & 0x0F <= 0x1 else { return .invalid }
        }
        guard bytes.count >= 16 else { return .needMore }
        let isProxy = bytes[12] & 0x0F == 0x1
        let family = Int(bytes[13] >> 4), transport = bytes[13] & 0x0F
        let blockLength = Int(bytes[14]) << 8 | Int(bytes[15])
        guard blockLength <= maxBlockLength else { return .invalid }
        var needed = 0  // LOCAL ignores the family
        if isProxy {
            guard family <= 3, transport <= 2 else { return .invalid }
            needed = [0, 12, 36, 216][family]  // UNSPEC, INET, INET6, UNIX
        }
        guard blockLength >= needed else { return .invalid }
        guard bytes.count >= 16 + blockLength else { return .needMore }
        let source: IPAddress? = switch (isProxy, family) {
        case (true, 1): IPAddress(bytes: bytes[16..<20])
        case (true, 2): IPAddress(bytes: bytes[16..<32])
        default: nil
        }
        return .header(length: 16 + blockLength, source: source)
    }
}
