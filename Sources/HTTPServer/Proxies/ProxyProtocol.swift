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
        let source: IPAddress? =
            switch (isProxy, family) {
            case (true, 1): IPAddress(bytes: bytes[16..<20])
            case (true, 2): IPAddress(bytes: bytes[16..<32])
            default: nil
            }
        return .header(length: 16 + blockLength, source: source)
    }
}
