import Foundation

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// Its bytes, in network order.
    public let bytes: [UInt8]

    /// The address of `bytes` (4 or 16 of them); `nil` for another count.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// The address `text` spells (`192.0.2.1`, `2001:db8::1`; no zone, no brackets);
    /// `nil` when it spells none.
    public init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            return nil
        }
    }

    public var isIPv4: Bool { bytes.count == 4 }

    /// The IPv4 address an IPv6 address carries where it stands for one: IPv4-mapped
    /// (`::ffff:a.b.c.d`) or the NAT64 well-known prefix (`64:ff9b::/96`).
    public var embeddedIPv4: IPAddress? {
        guard bytes.count == 16 else { return nil }
        let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
        let nat64 = bytes[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]
        return mapped || nat64 ? IPAddress(bytes: Array(bytes[12..<16])) : nil
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        bytes.withUnsafeBytes { raw in _ = inet_ntop(isIPv4 ? AF_INET : AF_INET6, raw.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A block of addresses in CIDR notation (`10.0.0.0/8`, `fd00::/8`; a bare address is
/// its own block).
public struct IPNetwork: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    /// How many leading bits the block's addresses share.
    public let prefix: Int

    /// The block `text` names; `nil` when it names none (a bad address, a prefix out of
    /// range, or host bits set past the prefix).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(parts[0])) else { return nil }
        let bits = address.bytes.count * 8
        let prefix: Int
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value), parts[1].allSatisfy(\.isASCII) else { return nil }
            prefix = value
        } else {
            prefix = bits
        }
        self.init(address, prefix: prefix)
        guard Self.masked(address.bytes, prefix) == address.bytes else { return nil }
    }

    /// The block of `address`'s first `prefix` bits.
    init(_ address: IPAddress, prefix: Int) {
        self.address = address
        self.prefix = prefix
    }

    /// Whether `candidate` lies in the block (an address of the other family never does).
    public func contains(_ candidate: IPAddress) -> Bool {
        candidate.bytes.count == address.bytes.count && Self.masked(candidate.bytes, prefix) == Self.masked(address.bytes, prefix)
    }

    private static func masked(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let kept = max(0, min(8, prefix - index * 8))
            return kept == 8 ? byte : byte & ~(UInt8.max >> kept)
        }
    }

    public var description: String { "\(address)/\(prefix)" }

    /// The blocks of a comma-separated list; throws naming the first that is not one.
    public static func list(_ text: String) throws -> [IPNetwork] {
        try text.split(separator: ",").map { item in
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            guard let network = IPNetwork(trimmed) else {
                throw AddressPolicy.Invalid(description: "'\(trimmed)' is not a network in CIDR notation, such as 127.0.0.1/32 or fd00::/8.")
            }
            return network
        }
    }
}
