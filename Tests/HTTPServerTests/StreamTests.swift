import Foundation
import TestSupport
import Testing

@testable import HTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// Response bodies sent while they are produced (``ResponseStream``).
@Suite(.serialized) struct StreamTests {
    /// Reads the raw bytes until the server closes the connection.
    private static func readAll(_ client: RawClient) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(client.fd, &chunk, chunk.count, 0)
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func aStreamIsSentInChunksAndEndsWithTheLastOne() async throws {
        let server = try TestServer()
        let text = try await onThread {
            let client = try server.client()
            try client.send("GET /stream/finite HTTP/1.1\r\nHost: x\r\n\r\n")
            return Self.readAll(client)
        }
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts[0].lowercased()
        #expect(head.hasPrefix("http/1.1 200"))
        #expect(head.contains("transfer-encoding: chunked"))
        #expect(!head.contains("content-length"))
        #expect(head.contains("connection: close"))
        #expect(parts.dropFirst().joined(separator: "\r\n\r\n") == "1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n")
    }

    @Test func anHTTP10StreamEndsWithTheConnection() async throws {
        let server = try TestServer()
        let text = try await onThread {
            let client = try server.client()
            try client.send("GET /stream/finite HTTP/1.0\r\n\r\n")
            return Self.readAll(client)
        }
        #expect(!text.lowercased().contains("transfer-encoding"))
        #expect(text.hasSuffix("\r\n\r\nabc"))
    }

    @Test func aHeadRequestGetsNoStreamButItsGetsFields() async throws {
        let server = try TestServer()
        let (response, next) = try await onThread {
            let client = try server.client()
            try client.send("HEAD /stream/finite HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            return (try client.readResponse(head: true), try client.readResponse())
        }
        #expect(response.status == 200)
        #expect(response.header("Transfer-Encoding") == "chunked", "framed as the GET is")
        #expect(response.header("Content-Length") == nil && response.header("Connection") == nil)
        #expect(next.text == "hello", "no body, and the connection serves on")
    }

    @Test func aClientThatDoesNotReadIsCutOffOnceItsBufferFills() async throws {
        let server = try TestServer()
        TestServer.flooded.withLock { $0 = nil }
        let client = try await onThread {
            let client = try server.client()
            try client.send("GET /stream/flood HTTP/1.1\r\nHost: x\r\n\r\n")
            return client
        }
        // The producer is refused after the stream's limit plus what the kernel holds,
        // not after the 256 MiB it would send.
        var total: Int?
        for _ in 0..<100 where total == nil {
            try await Task.sleep(for: .milliseconds(50))
            total = TestServer.flooded.withLock { $0 }
        }
        let sent = try #require(total, "the stream refused a chunk")
        #expect(sent < 64 << 20, "\(sent) bytes were taken")
        // And the connection is closed: reading drains what was sent, then the end.
        let closed = try await onThread { () -> Bool in
            client.setReceiveTimeout(5)
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(client.fd, &chunk, chunk.count, 0)
                if count == 0 || (count < 0 && errno == ECONNRESET) { return true }
                if count < 0 { return false }
            }
        }
        #expect(closed)
    }

    /// What a stream holds for a client that reads nothing is its own limit and a small,
    /// fixed kernel send buffer, not the megabytes TCP grows a socket's buffer to for such
    /// a client: hundreds of idle streams cannot take the machine's kernel memory, and a
    /// loop copies little into each per write (unbounded, those copies stalled the loops
    /// for tens of milliseconds in `noisy-neighbour.sh idle-streams`).
    @Test func aStreamsSocketKeepsASmallFixedSendBuffer() async throws {
        let server = try TestServer()
        let client = try await onThread {
            let client = try server.client()
            try client.send("GET /budgeted/trickle HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.readResponse(head: true)
            return client
        }
        // The server's end of this connection (the server runs in this process).
        var address = sockaddr_in(), length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(client.fd, $0, &length) } }
        let clientPort = UInt16(bigEndian: address.sin_port)
        var sizes: [Int32] = []
        for fd in Int32(3)..<4096 where fd != client.fd {
            var peer = sockaddr_in(), peerLength = socklen_t(MemoryLayout<sockaddr_in>.size)
            let found = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &peerLength) } }
            guard found == 0, peer.sin_family == sa_family_t(AF_INET), UInt16(bigEndian: peer.sin_port) == clientPort else { continue }
            var size: Int32 = 0, sizeLength = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &sizeLength)
            sizes.append(size)
        }
        // Linux doubles what is set, and a set size is not grown.
        #expect(sizes == [2 * Connection.streamSendBuffer], "the server's send buffers for this client: \(sizes)")
        withExtendedLifetime(client) {}
    }

    @Test func streamsShareOneBudgetAndTheFurthestBehindAreCutFirst() async throws {
        let server = try TestServer()
        let budget = TestServer.streamBudget
        // One client reads a slow stream; four read nothing from streams that flood.
        let reader = try await onThread { () -> RawClient in
            let client = try server.client()
            try client.send("GET /budgeted/trickle HTTP/1.1\r\nHost: x\r\n\r\n")
            return client
        }
        let idle = try await onThread {
            try (0..<4).map { _ in
                let client = try server.client()
                try client.send("GET /budgeted/flood HTTP/1.1\r\nHost: x\r\n\r\n")
                return client
            }
        }
        // Every flood is cut, each well before its own 64 MiB limit, and the reader's
        // stream, never behind, runs to its end.
        let body = try await onThread { () -> String in
            reader.setReceiveTimeout(10)
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while !String(decoding: received, as: UTF8.self).hasSuffix("0\r\n\r\n") {
                let count = recv(reader.fd, &chunk, chunk.count, 0)
                guard count > 0 else { break }
                received += chunk[0..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }
        #expect(body.components(separatedBy: "0123456789").count - 1 == 100, "the reader got every chunk")
        var floods: [Int] = []
        for _ in 0..<100 where floods.count < 4 {
            try await Task.sleep(for: .milliseconds(50))
            floods = TestServer.floods.withLock { $0 }
        }
        #expect(floods.count == 4, "every flood was cut")
        #expect(floods.allSatisfy { $0 < 16 << 20 }, "each cut before its own limit: \(floods)")
        #expect(budget.cutStreams >= 4)
        // Past the budget only while the streams furthest behind are not yet 100 ms behind.
        #expect(TestServer.budgetPeak.withLock { $0 } <= 4 << 20, "\(TestServer.budgetPeak.withLock { $0 })")
        #expect(budget.unsentBytes >= 0)
        // Gone before the server, whose shutdown would otherwise wait to end their streams.
        for client in idle { client.hangUp() }
        try await Task.sleep(for: .milliseconds(200))
        #expect(budget.unsentBytes == 0, "closed streams give their bytes back")
    }
}
