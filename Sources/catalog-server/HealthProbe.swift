import CTLS
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A minimal blocking HTTP/1.1 request over a loopback socket, in plaintext or over TLS:
/// no URLSession (and no libcurl) in the image's health check.
///
/// Over TLS the server's certificate is not verified: the probe talks to its own
/// machine's loopback address, which the certificate (for the public name) does not name.
enum HealthProbe {
    /// The raw response (head and body), or `nil` when nothing answered in time.
    static func get(port: Int, tls: Bool, path: String, timeout: Double) -> String? {
        request("GET", port: port, tls: tls, path: path, timeout: timeout)
    }

    /// Sends `method path` without a body; the raw response, or `nil`.
    static func request(_ method: String, port: Int, tls: Bool, path: String, timeout: Double, headers: [String] = []) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var wait = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        let fields = headers.map { $0 + "\r\n" }.joined()
        let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(fields)Content-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        /// The response, read with `receive` (bytes read, 0 or less at the end) up to 1 MiB.
        func collect(_ receive: (UnsafeMutableRawBufferPointer) -> Int) -> String? {
            var response: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while response.count < 1 << 20 {
                let count = chunk.withUnsafeMutableBytes(receive)
                guard count > 0 else { break }
                response += chunk[0..<count]
            }
            return response.isEmpty ? nil : String(decoding: response, as: UTF8.self)
        }
        guard tls else {
            guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
            return collect { recv(fd, $0.baseAddress, $0.count, 0) }
        }
        guard let context = ctls_client_context(nil) else { return nil }
        defer { SSL_CTX_free(context) }
        guard let ssl = SSL_new(context) else { return nil }
        defer { SSL_free(ssl) }
        var written = 0
        guard SSL_set_fd(ssl, fd) == 1, SSL_connect(ssl) == 1,
            request.withUnsafeBytes({ SSL_write_ex(ssl, $0.baseAddress, $0.count, &written) }) == 1
        else { return nil }
        return collect { buffer in
            var count = 0
            return SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count) == 1 ? count : 0
        }
    }
}
