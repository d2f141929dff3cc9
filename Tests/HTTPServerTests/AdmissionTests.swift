import Foundation
import TestSupport
import Testing

@testable import HTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// What a request must pass before its body is read, and whom it counts as: a route's
/// body limit and admission check decided from the head, each address's share of the body
/// budget, and the client a trusted proxy names.
@Suite(.serialized) struct AdmissionTests {
    @Test(arguments: Transport.allCases) func aRefusedHeadIsAnsweredBeforeItsBody(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let before = TestServer.guardedBodies.withLock { $0 }
        try await onThread {
            // No credential, a body still to come: refused at once, and the connection closes.
            let waiting = try server.client()
            try waiting.send("POST /guarded HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n")
            let refused = try waiting.readResponse()
            #expect(refused.status == 401)
            #expect(refused.problemCode == "unauthenticated")
            #expect(refused.header("Connection") == "close")
            #expect(waiting.waitForClose())
            #expect(server.server.bufferedBodyBytes == 0)
            // With 100-continue, the client is never told to send.
            let asking = try server.client()
            try asking.send("POST /guarded HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 50\r\n\r\n")
            #expect(try asking.readResponse().status == 401)
            // A refused body that arrived whole is skipped, and the connection serves on.
            let whole = try server.client()
            try whole.send("POST /guarded HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try whole.readResponse().status == 401)
            #expect(try whole.readResponse().text == "hello")
            // The route's own limit, from the declared length or while decoding chunks.
            let large = try server.client()
            try large.send("POST /guarded HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Length: 101\r\n\r\n")
            let tooLarge = try large.readResponse()
            #expect(tooLarge.status == 413)
            #expect(tooLarge.problem?["detail"] as? String == "The request body exceeds the limit of 100 bytes.")
            let chunked = try server.client()
            try chunked.send(
                "POST /guarded HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "50\r\n" + String(repeating: "a", count: 80) + "\r\n50\r\n" + String(repeating: "b", count: 80) + "\r\n0\r\n\r\n")
            #expect(try chunked.readResponse().status == 413)
            // No handler reads a body for OPTIONS or a method the server does not implement.
            let options = try server.client()
            try options.send("OPTIONS /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
            #expect(try options.readResponse().status == 413)
            let brew = try server.client()
            try brew.send("BREW /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n")
            let unimplemented = try brew.readResponse()
            #expect(unimplemented.status == 405 && unimplemented.header("Connection") == "close", "answered from the head")
            let fine = try server.client()
            try fine.send("POST /guarded HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Length: 100\r\n\r\n" + String(repeating: "c", count: 100))
            #expect(try fine.readResponse().text == "got 100 from good", "what the admission found reaches the handler")
        }
        #expect(TestServer.guardedBodies.withLock { $0 } == before + 1, "only the admitted body reached its handler")
    }

    @Test func oneAddressHoldsOnlyItsShareOfTheBodyBudget() async throws {
        let server = try TestServer {
            $0.limits.maxBody = 300
            $0.maxBufferedBodyBytes = 1000
            $0.maxBufferedBodyBytesPerAddress = 400
        }
        try await onThread {
            let first = try server.client(from: "127.0.0.7")
            try first.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n" + String(repeating: "a", count: 250))
            usleep(100_000)
            #expect(server.server.bufferedBodyBytes == 250)
            // The same address, past its share: refused, though the budget has room.
            let second = try server.client(from: "127.0.0.7")
            try second.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n" + String(repeating: "b", count: 200))
            let refused = try second.readResponse()
            #expect(refused.status == 503)
            #expect(refused.problemCode == "serverBusy")
            // Another address has its own share.
            let other = try server.client(from: "127.0.0.8")
            try other.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n" + String(repeating: "c", count: 300))
            #expect(try other.readResponse().body.count == 300)
            try first.send(String(repeating: "a", count: 50))
            #expect(try first.readResponse().body.count == 300)
            #expect(server.server.bufferedBodyBytes == 0)
        }
    }

    @Test func aTrustedProxyNamesItsClientsInXForwardedFor() async throws {
        let server = try TestServer {
            $0.maxConnectionsPerAddress = 2
            $0.trustedProxies = TrustedProxies([IPNetwork("127.0.0.1")!])
        }
        try await onThread {
            func request(_ client: RawClient, forwardedFor: String) throws -> RawResponse {
                try client.send("GET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: \(forwardedFor)\r\n\r\n")
                return try client.readResponse()
            }
            // A proxy's connection counts for the client whose request it carries, while it
            // carries it: one client's two requests held open take its two places.
            let one = try server.client(), two = try server.client(), three = try server.client()
            #expect(try request(one, forwardedFor: "198.51.100.9, 203.0.113.1").text == "203.0.113.1")
            let tokens = [UUID().uuidString, UUID().uuidString]
            for (client, token) in zip([one, two], tokens) {
                try client.send("GET /wait/\(token) HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.1\r\n\r\n")
            }
            // Answered at the end, so the server's shutdown waits for nothing.
            defer { for token in tokens { TestServer.waiting.withLock { $0[token] }?.respond(.text("done")) } }
            usleep(100_000)
            let refused = try request(three, forwardedFor: "203.0.113.1")
            #expect(refused.status == 503)
            #expect(refused.problemCode == "tooManyConnections")
            // Another client behind the same proxy is served, and an idle pooled connection
            // counts for nobody: it carries the next client's request.
            let other = try server.client()
            #expect(try request(other, forwardedFor: "203.0.113.2").text == "203.0.113.2")
            #expect(try request(other, forwardedFor: "2001:db8:1:2::7").text == "20:1:d:b8:0:1:0:2::/64")
            one.hangUp()
            usleep(100_000)
            let again = try server.client()
            #expect(try request(again, forwardedFor: "203.0.113.1").text == "203.0.113.1", "a place given back")
            // Fields that name no client share a key of their own, not the proxy's.
            let unnamed = try server.client()
            #expect(try request(unnamed, forwardedFor: "unknown").text == "unattributed via 127.0.0.1")
            try unnamed.send("GET /client HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try unnamed.readResponse().text == "127.0.0.1", "the proxy's own request (a health check)")
            // Anyone else's forwarding fields are not believed.
            let direct = try server.client(from: "127.0.0.9")
            #expect(try request(direct, forwardedFor: "203.0.113.50").text == "127.0.0.9")
        }
    }

    @Test func aTrustedProxyMayNameItsClientsWithTheProxyProtocol() async throws {
        let server = try TestServer {
            $0.trustedProxies = TrustedProxies([IPNetwork("127.0.0.1")!], source: .proxyProtocol)
        }
        try await onThread {
            // A version 2 PROXY header for TCP over IPv4 from 198.51.100.4:5000 to 127.0.0.1:80, sent in two parts.
            let header: [UInt8] = [
                0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0x00, 0x0C,
                198, 51, 100, 4, 127, 0, 0, 1, 0x13, 0x88, 0x00, 0x50,
            ]
            let proxied = try server.client()
            try proxied.send(Array(header[0..<10]))
            usleep(50_000)
            try proxied.send(Array(header[10...]) + Array("GET /client HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(try proxied.readResponse().text == "198.51.100.4")
            // A trusted peer that sends no such header is cut off; others need none.
            let bare = try server.client()
            try bare.send("GET /client HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(bare.waitForClose())
            let direct = try server.client(from: "127.0.0.9")
            try direct.send("GET /client HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try direct.readResponse().text == "127.0.0.9")
        }
    }
}
