import Foundation
import Synchronization
import TestSupport
import Testing

@testable import HTTPServer

#if canImport(Glibc)
import Glibc
#endif

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// How a test talks to the server: the same behaviour is expected over both.
enum Transport: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case plaintext
    case tls

    var testDescription: String { rawValue }
}

/// A server on an ephemeral loopback port with routes made for testing the HTTP layer.
final class TestServer: Sendable {
    let server: HTTPServer
    let transport: Transport
    var port: Int { server.port }

    /// A configuration with short timeouts, one loop thread and a small body limit.
    static func configuration(_ adjust: (inout ServerConfiguration) -> Void = { _ in }) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.loopThreads = 1
        configuration.limits.maxBody = 64 * 1024
        configuration.headTimeout = .milliseconds(500)
        configuration.bodyTimeout = .milliseconds(500)
        configuration.keepAliveTimeout = .milliseconds(800)
        configuration.lingerTimeout = .milliseconds(300)
        configuration.shutdownTimeout = .seconds(5)
        adjust(&configuration)
        return configuration
    }

    /// `count` bytes that tell their positions apart (`/bytes/{count}`): a byte out of
    /// place, lost or repeated changes what a client reads.
    static func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
    }

    static func router() -> Router {
        var router = Router()
        router.add(.GET, "/", .inline { _ in .text("root") })
        router.add(.GET, "/hello", .inline { _ in .text("hello") })
        router.add(
            .GET, "/twice",
            .deferred { _, responder in
                responder.respond(.text("first"))
                responder.respond(.text("second, ignored"))
            })
        router.add(
            .POST, "/echo",
            .inline { request in
                HTTPResponse(status: .ok, headers: [("Content-Type", "application/octet-stream")], body: request.body)
            })
        router.add(.GET, "/items/{id}", .inline { request in .text(request.pathParameters["id"] ?? "?") })
        router.add(
            .GET, "/bytes/{count}",
            .inline { request in
                let count = Int(request.pathParameters["count"] ?? "") ?? 0
                return HTTPResponse(status: .ok, headers: [("Content-Type", "application/octet-stream")], body: TestServer.bytes(count))
            })
        router.add(.DELETE, "/items/{id}", .inline { _ in HTTPResponse(status: .noContent) })
        router.add(
            .GET, "/query",
            .inline { request in
                .text(try request.queryItems().map { "\($0.name)=\($0.value)" }.joined(separator: "&"))
            })
        router.add(.GET, "/header", .inline { request in .text(request.headers["X-Probe"] ?? "-") })
        router.add(
            .GET, "/slow/{ms}",
            .blocking { request in
                usleep(UInt32(Int(request.pathParameters["ms"] ?? "0") ?? 0) * 1000)
                return .text("slow done")
            })
        router.add(
            .GET, "/async",
            .async { _ in
                try await Task.sleep(for: .milliseconds(10))
                return .text("async done")
            })
        router.add(
            .GET, "/wait/{token}",
            .deferred { request, responder in
                // Never answers: the test watches the responder through ``waiting``.
                Self.waiting.withLock { $0[request.pathParameters["token"] ?? ""] = responder }
            })
        router.add(
            .GET, "/stream/{mode}",
            .deferred { request, responder in
                // `finite`: three chunks, then the end; `flood`: 64 KiB chunks until the stream refuses one.
                let stream = ResponseStream(limit: 256 * 1024)
                var response = HTTPResponse(status: .ok, headers: [("Content-Type", "text/plain")])
                response.stream = stream
                let flood = request.pathParameters["mode"] == "flood"
                stream.send(Array("a".utf8))
                responder.respond(response)
                Thread {
                    if flood {
                        var total = 0
                        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024)
                        while total < 256 << 20, stream.send(chunk) { total += chunk.count }
                        Self.flooded.withLock { $0 = total }
                    } else {
                        stream.send(Array("b".utf8))
                        stream.send(Array("c".utf8))
                        stream.finish()
                    }
                }.start()
            })
        router.add(
            .GET, "/budgeted/{mode}",
            .deferred { request, responder in
                // Streams sharing ``streamBudget``: `flood` sends 64 KiB every 10 ms until refused
                // (then records what it sent); `trickle` sends 10 bytes every 20 ms for 2 s, then ends.
                let stream = ResponseStream(limit: 16 << 20, budget: Self.streamBudget)
                var response = HTTPResponse(status: .ok, headers: [("Content-Type", "text/plain")])
                response.stream = stream
                responder.respond(response)
                let flood = request.pathParameters["mode"] == "flood"
                Thread {
                    if flood {
                        var total = 0
                        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024)
                        while total < 256 << 20, stream.send(chunk) {
                            total += chunk.count
                            Self.budgetPeak.withLock { $0 = max($0, Self.streamBudget.unsentBytes) }
                            usleep(10_000)
                        }
                        Self.floods.withLock { $0.append(total) }
                    } else {
                        for _ in 0..<100 {
                            guard stream.send(Array("0123456789".utf8)) else { return }
                            usleep(20_000)
                        }
                        stream.finish()
                    }
                }.start()
            })
        router.add(.GET, "/client", .inline { request in .text(request.clientAddress) })
        // Bodies of at most 100 bytes, from a caller that says `Bearer good` in its head.
        router.add(
            .POST, "/guarded",
            Handler.inline { request in
                Self.guardedBodies.withLock { $0 += 1 }
                return .text("got \(request.body.count) from \((request.admitted as? Word)?.text ?? "?")")
            }.limitingBody(to: 100).admitting { request in
                guard request.headers["Authorization"] == "Bearer good" else {
                    throw HTTPError(.unauthorized, code: "unauthenticated", detail: "Say the word.")
                }
                return Word(text: "good")
            })
        router.add(.GET, "/fail", .inline { _ in throw TestFailure("secret internal detail") })
        router.add(
            .GET, "/teapot",
            .blocking { _ in
                throw HTTPError(HTTPStatus(code: 418, reasonPhrase: "I'm a teapot"), code: "teapot", detail: "Short and stout.")
            })
        // A streamed body: refused from its head with `X-Refuse`, else taken into a sink
        // that pauses the connection every 64 KiB for a moment.
        router.add(
            .POST, "/sink",
            Handler.deferred { request, responder in
                if request.headers["x-refuse"] != nil { return responder.respond(HTTPResponse(status: .forbidden)) }
                responder.receiveBody(into: CountingSink(responder))
            }.streamingBody().allowingBody(upTo: 8 << 20))
        router.add(
            .GET, "/file",
            .inline { request in
                guard let file = try ResponseFile.open(TestServer.servedFile) else { throw HTTPError(.notFound, code: "notFound", detail: "none") }
                return .serving(file, for: request, contentType: "application/octet-stream", etag: "\"file\"")
            })
        return router
    }

    /// The file `/file` serves: 300,000 bytes, byte `i` being `i % 251`.
    static let servedFile: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("served-\(getpid())").path
        _ = FileManager.default.createFile(atPath: path, contents: Data((0..<300_000).map { UInt8($0 % 251) }))
        return path
    }()

    /// How many `/sink` bodies ended cut off.
    static let cutBodies = Mutex(0)

    /// Counts a streamed body, pausing every 64 KiB for a millisecond; answers how much it
    /// got once the body is complete.
    final class CountingSink: RequestBodySink, @unchecked Sendable {
        let responder: Responder
        let received = Mutex(0)
        init(_ responder: Responder) { self.responder = responder }

        func receive(_ bytes: UnsafeRawBufferPointer) -> BodyIntake {
            let (before, after) = received.withLock { count in
                defer { count += bytes.count }
                return (count, count + bytes.count)
            }
            guard before / 65536 != after / 65536 else { return .taken }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { [responder] in responder.resumeBody() }
            return .paused
        }

        func end(complete: Bool) {
            guard complete else { return TestServer.cutBodies.withLock { $0 += 1 } }
            responder.respond(.text("got \(received.withLock { $0 })"))
        }
    }

    /// How many bytes the last `/stream/flood` got into its stream before it was refused.
    static let flooded = Mutex<Int?>(nil)

    /// The budget `/budgeted/…` streams share: 1 MiB, cutting streams 100 ms behind.
    static let streamBudget = StreamBudget(limit: 1 << 20, minimumLag: .milliseconds(100))
    /// The most unsent bytes `/budgeted/flood` streams saw the budget hold.
    static let budgetPeak = Mutex(0)
    /// What each ended `/budgeted/flood` stream had sent.
    static let floods = Mutex<[Int]>([])

    /// What `/guarded`'s admission check hands its handler.
    final class Word: Sendable {
        let text: String
        init(text: String) { self.text = text }
    }

    /// How many bodies `/guarded` received.
    static let guardedBodies = Mutex(0)

    /// The responders of `/wait/{token}` requests, by token.
    static let waiting = Mutex<[String: Responder]>([:])

    /// A server speaking `transport` (TLS with the test run's certificate for localhost).
    init(_ transport: Transport = .plaintext, _ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws {
        self.transport = transport
        var configuration = Self.configuration(adjust)
        if transport == .tls {
            let certificates = try TestCertificates.shared()
            configuration.tls = try TLSContext(certificateFile: certificates.certificateFile, privateKeyFile: certificates.keyFile)
        }
        server = try HTTPServer(configuration: configuration, router: Self.router())
        try server.start()
    }

    deinit { server.shutdown() }

    /// A connected client (with a completed handshake over TLS).
    func client(from source: String = "127.0.0.1") throws -> RawClient {
        try RawClient(port: port, source: source, caFile: transport == .tls ? TestCertificates.shared().caFile : nil)
    }
}

/// A response read off a raw socket.
struct RawResponse: Sendable {
    var status: Int
    var reason: String
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The decoded problem document.
    var problem: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }

    var problemCode: String? { problem?["code"] as? String }
}

/// A blocking TCP client that sends exact bytes and reads exact responses, in plaintext
/// or (given a CA file) over TLS.
final class RawClient: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    let tls: TLSClient?
    /// How the server ended the stream, once it did (TLS only: whether close_notify came).
    private(set) var end: TLSClient.End?

    init(port: Int, receiveTimeout: Double = 10, source: String = "127.0.0.1", caFile: String? = nil) throws {
        let fd = try Loopback.connect(port: port, receiveTimeout: receiveTimeout, source: source)
        do {
            tls = try caFile.map { try TLSClient(fd: fd, caFile: $0) }
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Closes both directions (the server sees FIN) without releasing the descriptor.
    func hangUp() { shutdown(fd, Int32(SHUT_RDWR)) }

    func setReceiveTimeout(_ seconds: Double) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        if let tls { return try tls.write(bytes) }
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw TestFailure("send failed: errno \(errno)") }
            offset += count
        }
    }

    /// Reads more bytes; returns false on EOF or reset.
    private func fill() throws -> Bool {
        if let tls {
            switch tls.read() {
            case let .success(bytes):
                buffer += bytes
                return true
            case let .failure(end):
                if case let .failure(reason) = end { throw TestFailure("TLS read failed or timed out: \(reason)") }
                self.end = end
                return false
            }
        }
        var chunk = [UInt8](repeating: 0, count: 65536)
        var count: Int
        // A signal another test sends this process (SIGUSR2) may interrupt the wait.
        repeat { count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) } } while count < 0 && errno == EINTR
        if count > 0 {
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        if count == 0 || errno == ECONNRESET { return false }
        throw TestFailure("recv failed or timed out: errno \(errno)")
    }

    /// Reads one response. `head` says it answers a HEAD request (no body follows).
    func readResponse(head: Bool = false) throws -> RawResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        var end: Int?
        while end == nil {
            if let range = firstRange(of: separator) { end = range; break }
            guard try fill() else { throw TestFailure("connection closed before a response head; got \(String(decoding: buffer, as: UTF8.self))") }
        }
        let headEnd = end! + 4
        let headText = String(decoding: buffer[0..<end!], as: UTF8.self)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0] == "HTTP/1.1", let status = Int(parts[1]) else { throw TestFailure("bad status line \(statusLine)") }
        let headers = lines.map { line -> (String, String) in
            let pieces = line.split(separator: ":", maxSplits: 1)
            return (String(pieces[0]), pieces.count > 1 ? String(pieces[1]).trimmingCharacters(in: .whitespaces) : "")
        }
        buffer.removeFirst(headEnd)
        var response = RawResponse(status: status, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers, body: [])
        if head || status < 200 || status == 204 || status == 304 { return response }
        guard let lengthText = response.header("Content-Length"), let length = Int(lengthText) else {
            throw TestFailure("response without Content-Length")
        }
        while buffer.count < length {
            guard try fill() else { throw TestFailure("connection closed inside a body") }
        }
        response.body = Array(buffer[0..<length])
        buffer.removeFirst(length)
        return response
    }

    /// Waits for the server to close the connection; true when it did (EOF or reset)
    /// before the receive timeout, with no further bytes.
    func waitForClose() -> Bool {
        do {
            while try fill() {}
            return buffer.isEmpty
        } catch {
            return false
        }
    }

    /// Whether the connection is still open: nothing to read and no EOF within `seconds`.
    func isOpen(after seconds: Double) -> Bool {
        setReceiveTimeout(seconds)
        defer { setReceiveTimeout(10) }
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK))
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    private func firstRange(of pattern: [UInt8]) -> Int? {
        guard buffer.count >= pattern.count else { return nil }
        for index in 0...(buffer.count - pattern.count) where buffer[index] == pattern[0] {
            if Array(buffer[index..<(index + pattern.count)]) == pattern { return index }
        }
        return nil
    }
}

/// Sends `request` on a fresh connection and returns the response and whether the
/// server then closed the connection.
func exchange(_ server: TestServer, _ request: String, head: Bool = false) throws -> (response: RawResponse, closed: Bool) {
    let client = try server.client()
    try client.send(request)
    let response = try client.readResponse(head: head)
    return (response, response.header("Connection") == "close" ? client.waitForClose() : false)
}
