import CLinux

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Thin, allocation-free helpers over the POSIX socket calls the server needs.
enum Socket {
    /// Creates a non-blocking TCP socket bound to `host:port` and listening.
    /// - Returns: the descriptor and the port actually bound (useful with port 0).
    static func listen(host: String, port: Int, backlog: Int32) throws -> (fd: Int32, port: Int) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &result)
        guard status == 0, let info = result else {
            throw SystemError("getaddrinfo(\(host)): \(String(cString: gai_strerror(status)))", errno: EINVAL)
        }
        defer { freeaddrinfo(result) }

        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        do {
            try setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else { throw SystemError("bind \(host):\(port)") }
            guard Glibc.listen(fd, backlog) == 0 else { throw SystemError("listen") }
            return (fd, try localPort(fd))
        } catch {
            close(fd)
            throw error
        }
    }

    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) throws {
        var value = value
        guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw SystemError("setsockopt")
        }
    }

    static func localPort(_ fd: Int32) throws -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { throw SystemError("getsockname") }
        return withUnsafePointer(to: &storage) { pointer -> Int in
            switch Int32(pointer.pointee.ss_family) {
            case AF_INET:
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            case AF_INET6:
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            default:
                return 0
            }
        }
    }

    /// Accepts one pending connection as a non-blocking socket with `TCP_NODELAY`.
    /// - Returns: the descriptor, the peer's address and port as text, and its address
    /// (`nil` for a family other than IPv4 and IPv6), or `nil` when none is pending.
    static func accept(_ listener: Int32) throws -> (fd: Int32, peer: String, address: IPAddress?)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                clinux_accept4(listener, $0, &length, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            }
        }
        if fd < 0 {
            switch errno {
            case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED, EPROTO: return nil
            default: throw SystemError("accept4")
            }
        }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return (fd, describe(&storage), address(&storage))
    }

    /// The IP address of `storage` (an IPv4-mapped IPv6 address as IPv4).
    private static func address(_ storage: inout sockaddr_storage) -> IPAddress? {
        withUnsafePointer(to: &storage) { pointer -> IPAddress? in
            switch Int32(pointer.pointee.ss_family) {
            case AF_INET:
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    withUnsafeBytes(of: address.pointee.sin_addr) { IPAddress(bytes: $0) }
                }
            case AF_INET6:
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    withUnsafeBytes(of: address.pointee.sin6_addr) { IPAddress(bytes: $0) }
                }
            default:
                return nil
            }
        }
    }

    private static func describe(_ storage: inout sockaddr_storage) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        return withUnsafePointer(to: &storage) { pointer -> String in
            switch Int32(pointer.pointee.ss_family) {
            case AF_INET:
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var addr = address.pointee.sin_addr
                    inet_ntop(AF_INET, &addr, &text, socklen_t(text.count))
                    return "\(cText(text)):\(UInt16(bigEndian: address.pointee.sin_port))"
                }
            case AF_INET6:
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var addr = address.pointee.sin6_addr
                    inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count))
                    return "[\(cText(text))]:\(UInt16(bigEndian: address.pointee.sin6_port))"
                }
            default:
                return "unknown"
            }
        }
    }

    private static func cText(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Raises the soft limit on open descriptors to the hard limit, so that
    /// thousands of keep-alive connections fit.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
