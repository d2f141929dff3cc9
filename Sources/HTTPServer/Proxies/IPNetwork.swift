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
