import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking code (sockets, child processes) on a thread of its own, so tests never
/// block the few threads of the cooperative pool that `.async` handlers and every test
/// task need: tests run in parallel in one process, and a blocked pool stalls them all.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.stackSize = 4 << 20
        thread.start()
    }
}

/// Raw TCP to a server on 127.0.0.1, for requests no HTTP client library would send.
public enum Loopback {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// A connected socket with a receive timeout of `receiveTimeout` seconds, from the
    /// loopback address `source` (any of 127.0.0.0/8 reaches the server).
    public static func connect(port: Int, receiveTimeout: Double = 10, source: String = "127.0.0.1") throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket failed: \(errno)") }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            throw Failure(description: "bind to \(source) failed: \(errno)")
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let error = errno
            close(fd)
            throw Failure(description: "connect failed: \(error)")
        }
        var timeout = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// Sends `bytes` and reads until the server closes (or 10 s pass), on a thread of its own.
    public static func exchange(port: Int, _ bytes: [UInt8]) async throws -> String {
        try await onThread { try blockingExchange(port: port, bytes) }
    }

    /// ``exchange(port:_:)`` on the calling thread: for a thread of a test's own, which
    /// waits on no task (a loaded suite can keep Swift's cooperative threads, and so an
    /// async client, busy for seconds).
    public static func blockingExchange(port: Int, _ bytes: [UInt8]) throws -> String {
        let fd = try connect(port: port)
        defer { close(fd) }
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { break }
            sent += count
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received += chunk[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }
}
