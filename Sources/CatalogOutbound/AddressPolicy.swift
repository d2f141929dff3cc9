/// Which addresses the server may connect to on others' behalf (webhook deliveries):
/// addresses on the public internet, and those of the classes it refuses — its own host,
/// private and internal networks, cloud metadata services — only inside networks the
/// operator allows. Plain `http` goes only to networks the operator names for it.
///
/// The check is of each address a connection is about to be made to, after name
/// resolution (``HTTPSender`` asks it for every socket), so a name that resolves to a
/// refused address, now or after a DNS change, reaches nothing.
public struct AddressPolicy: Sendable {
    /// A list that is not one of networks.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// What an address is, for the policy.
    public enum AddressClass: String, Sendable, CaseIterable {
        /// A global unicast address.
        case global
        /// A cloud provider's metadata or platform service (credentials live there).
        case metadata
        /// This host (127.0.0.0/8, ::1).
        case loopback
        /// "This network" or no address (0.0.0.0/8, ::): Linux connects it to this host.
        case unspecified
        /// A private network (RFC 1918, IPv6 site-local, local-use NAT64).
        case `private`
        /// Carrier-grade NAT's shared space (100.64.0.0/10).
        case sharedAddressSpace = "shared address space"
        /// Link-local (169.254.0.0/16, fe80::/10).
        case linkLocal = "link-local"
        /// IPv6 unique-local (fc00::/7).
        case uniqueLocal = "unique-local"
        /// Multicast (224.0.0.0/4, ff00::/8) and broadcast.
        case multicast
        /// Documentation and benchmarking ranges.
        case documentation
        /// Reserved or special-purpose: IETF protocol assignments, the future-use block,
        /// IPv6 transition tunnels (6to4, Teredo) and what lies outside 2000::/3.
        case reserved
    }

    /// The networks where refused classes are allowed anyway (`--webhook-allowed-networks`).
    public let allowed: [IPNetwork]
    /// The networks plain `http` may reach (`--webhook-http-networks`); none: https only.
    public let plainHTTP: [IPNetwork]

    public init(allowed: [IPNetwork] = [], plainHTTP: [IPNetwork] = []) {
        self.allowed = allowed
        self.plainHTTP = plainHTTP
    }

    /// Why a connection to `address` is refused, for a plain `http` URL when `plainHTTP`;
    /// `nil` when it may be made.
    public func refusal(_ address: IPAddress, plainHTTP isPlain: Bool) -> String? {
        let forms = [address] + (address.embeddedIPv4.map { [$0] } ?? [])
        let kind = Self.classify(address)
        if kind != .global, !forms.contains(where: { form in allowed.contains { $0.contains(form) } }) {
            return "\(address) is a \(kind.rawValue) address, refused (allow it with --webhook-allowed-networks)"
        }
        if isPlain, !forms.contains(where: { form in plainHTTP.contains { $0.contains(form) } }) {
            return "\(address) may not be sent plain http (only https, but to --webhook-http-networks)"
        }
        return nil
    }

    /// The class of `address`; an IPv6 address standing for an IPv4 one
    /// (``IPAddress/embeddedIPv4``) is of that one's class.
    public static func classify(_ address: IPAddress) -> AddressClass {
        if let embedded = address.embeddedIPv4 { return classify(embedded) }
        for (network, kind) in address.isIPv4 ? ipv4 : ipv6 where network.contains(address) { return kind }
        // Global unicast is 2000::/3; the rest of IPv6 is not assigned for it.
        return address.isIPv4 || address.bytes[0] & 0xE0 == 0x20 ? .global : .reserved
    }

    private static func table(_ entries: [(String, AddressClass)]) -> [(IPNetwork, AddressClass)] {
        entries.compactMap { text, kind in IPNetwork(text).map { ($0, kind) } }
    }

    /// IPv4's special blocks, the narrowest first (metadata services inside broader blocks).
    private static let ipv4 = table([
        ("169.254.169.254/32", .metadata),  // AWS, GCP, Azure, OpenStack
        ("168.63.129.16/32", .metadata),  // Azure's platform service (a global address)
        ("100.100.100.200/32", .metadata),  // Alibaba Cloud
        ("192.0.0.192/32", .metadata),  // Oracle Cloud
        ("0.0.0.0/8", .unspecified),
        ("10.0.0.0/8", .private),
        ("100.64.0.0/10", .sharedAddressSpace),
        ("127.0.0.0/8", .loopback),
        ("169.254.0.0/16", .linkLocal),
        ("172.16.0.0/12", .private),
        ("192.0.0.0/24", .reserved),
        ("192.0.2.0/24", .documentation),
        ("192.88.99.0/24", .reserved),
        ("192.168.0.0/16", .private),
        ("198.18.0.0/15", .documentation),
        ("198.51.100.0/24", .documentation),
        ("203.0.113.0/24", .documentation),
        ("224.0.0.0/4", .multicast),
        ("255.255.255.255/32", .multicast),
        ("240.0.0.0/4", .reserved),
    ])

    /// IPv6's special blocks inside and outside 2000::/3, the narrowest first.
    private static let ipv6 = table([
        ("fd00:ec2::254/128", .metadata),  // AWS over IPv6
        ("::/128", .unspecified),
        ("::1/128", .loopback),
        ("::/96", .reserved),  // IPv4-compatible (deprecated)
        ("64:ff9b:1::/48", .private),  // local-use NAT64
        ("100::/64", .reserved),  // discard-only
        ("2001:db8::/32", .documentation),
        ("2001:2::/48", .documentation),  // benchmarking
        ("2001::/23", .reserved),  // IETF protocol assignments, Teredo among them
        ("2002::/16", .reserved),  // 6to4
        ("3fff::/20", .documentation),
        ("fc00::/7", .uniqueLocal),
        ("fe80::/10", .linkLocal),
        ("fec0::/10", .private),  // site-local (deprecated)
        ("ff00::/8", .multicast),
    ])
}
