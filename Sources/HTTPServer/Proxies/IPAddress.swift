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
                head.count + tail.count <= 7
            else { return nil }
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
