#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The request methods the server implements. Any other method token is answered with 501.
public enum HTTPMethod: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // The methods' own names, as RFC 9110 spells them.
    case GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS

    /// The method's name as sent on the wire.
    public var description: String { rawValue }

    /// Recognizes a method token without creating a `String`.
    init?(bytes: UnsafeBufferPointer<UInt8>) {
        switch bytes.count {
        case 3:
            if bytes[0] == 0x47, bytes[1] == 0x45, bytes[2] == 0x54 { self = .GET; return }
            if bytes[0] == 0x50, bytes[1] == 0x55, bytes[2] == 0x54 { self = .PUT; return }
        case 4:
            if Self.equal(bytes, "HEAD") { self = .HEAD; return }
            if Self.equal(bytes, "POST") { self = .POST; return }
        case 5:
            if Self.equal(bytes, "PATCH") { self = .PATCH; return }
        case 6:
            if Self.equal(bytes, "DELETE") { self = .DELETE; return }
        case 7:
            if Self.equal(bytes, "OPTIONS") { self = .OPTIONS; return }
        default:
            break
        }
        return nil
    }

    private static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        literal.withUTF8Buffer { expected in expected.elementsEqual(bytes) }
    }
}

/// The protocol version of a request. Only HTTP/1.0 and HTTP/1.1 are accepted.
public enum HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    // swift-format-ignore: AlwaysUseLowerCamelCase
    case http1_0, http1_1

    /// The version as sent on the wire, such as `HTTP/1.1`.
    public var description: String { self == .http1_0 ? "HTTP/1.0" : "HTTP/1.1" }
}
