import Foundation
import TestSupport
import Testing

@testable import HTTPServer

/// Bodies a route takes as a stream (``RequestBodySink``) and files sent as bodies: the
/// body read only once the handler takes it, paused while its sink catches up, counted
/// against the route's limit, skipped or the connection closed when refused, and the
/// requests after it served in order; a file sent whole or as one range, by `sendfile`
/// or through TLS, with keep-alive after it.
@Suite struct StreamedBodyTests {
    @Test(arguments: Transport.allCases) func aStreamedBodyPausesAndTheNextRequestFollows(_ transport: Transport) async throws {
        // Beside the whole suite, making and sending 8 MiB can pause longer than the test
        // server's half-second head and body timeouts, which then end the connection.
        let server = try TestServer(transport) {
            $0.headTimeout = .seconds(10)
            $0.bodyTimeout = .seconds(10)
        }
        try await onThread {
            let client = try server.client()
            let body = [UInt8](repeating: 7, count: 1 << 20)
            try client.send(Array("POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body + Array("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(try client.readResponse().text == "got \(1 << 20)")
            #expect(try client.readResponse().text == "hello")
            // Chunked: decoded as it arrives, and counted whole against the route's limit.
            try client.send("POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n")
            #expect(try client.readResponse().text == "got 8")
            // Chunks each within the limit, adding up past it (8 MiB): refused once the total
            // passes it, whatever the size of each. (The byte past it comes last, so the client
            // has sent all before the refusal closes the connection.)
            let chunk = String(repeating: "z", count: 1 << 20)
            var stream = "POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            for _ in 0..<8 { stream += "100000\r\n" + chunk + "\r\n" }
            stream += "1\r\nz\r\n0\r\n\r\n"
            let large = try server.client()  // connected once the stream is made
            try large.send(stream)
            #expect(try large.readResponse().status == 413)
        }
    }

    @Test func aBodyRefusedFromItsHeadIsSkippedOrEndsTheConnection() async throws {
        let server = try TestServer()
        try await onThread {
            let whole = try server.client()
            try whole.send("POST /sink HTTP/1.1\r\nHost: x\r\nX-Refuse: 1\r\nContent-Length: 5\r\n\r\nhelloGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try whole.readResponse().status == 403)
            #expect(try whole.readResponse().text == "hello")
            let partial = try server.client()
            try partial.send("POST /sink HTTP/1.1\r\nHost: x\r\nX-Refuse: 1\r\nContent-Length: 500\r\n\r\nhello")
            let refused = try partial.readResponse()
            #expect(refused.status == 403 && refused.header("Connection") == "close")
            #expect(partial.waitForClose())
            // 100-continue: sent when the handler takes the body, never when it refuses it.
            let asking = try server.client()
            try asking.send("POST /sink HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
            #expect(try asking.readResponse().status == 100)
            try asking.send("abc")
            #expect(try asking.readResponse().text == "got 3")
            let refusing = try server.client()
            try refusing.send("POST /sink HTTP/1.1\r\nHost: x\r\nX-Refuse: 1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
            #expect(try refusing.readResponse().status == 403)
        }
    }

    @Test func aBodyCutOffEndsItsSinkIncomplete() async throws {
        let server = try TestServer()
        let before = TestServer.cutBodies.withLock { $0 }
        try await onThread {
            let client = try server.client()
            try client.send("POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "a", count: 400))
            client.hangUp()
        }
        // (Other tests cut bodies off too, at the same time.)
        for _ in 0..<100 where TestServer.cutBodies.withLock({ $0 }) == before { try await Task.sleep(for: .milliseconds(20)) }
        #expect(TestServer.cutBodies.withLock { $0 } > before)
    }

    @Test(arguments: Transport.allCases) func aFileIsSentWholeOrAsOneRange(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let expected = (0..<300_000).map { UInt8($0 % 251) }
        try await onThread {
            let client = try server.client()
            try client.send("GET /file HTTP/1.1\r\nHost: x\r\n\r\nGET /file HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-1999\r\n\r\nHEAD /file HTTP/1.1\r\nHost: x\r\n\r\n")
            let whole = try client.readResponse()
            #expect(whole.status == 200 && whole.body == expected && whole.header("Accept-Ranges") == "bytes")
            let part = try client.readResponse()
            #expect(part.status == 206 && part.header("Content-Range") == "bytes 1000-1999/300000" && part.body == Array(expected[1000..<2000]))
            let head = try client.readResponse(head: true)
            #expect(head.status == 200 && head.header("Content-Length") == "300000")
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "hello", "keep-alive after the file")
        }
    }

    @Test func rangesAreReadAsRFC9110Says() {
        let size = 1000
        #expect(RangeRequest.parse("bytes=0-499", size: size) == .part(0..<500))
        #expect(RangeRequest.parse("bytes=500-", size: size) == .part(500..<1000))
        #expect(RangeRequest.parse("bytes=-200", size: size) == .part(800..<1000))
        #expect(RangeRequest.parse("bytes=-5000", size: size) == .part(0..<1000))
        #expect(RangeRequest.parse("bytes=990-99999999999999999999999", size: size) == .part(990..<1000))
        #expect(RangeRequest.parse("BYTES = 0-0", size: size) == .whole)
        #expect(RangeRequest.parse("Bytes=0-0", size: size) == .part(0..<1))
        #expect(RangeRequest.parse("bytes=1000-", size: size) == .unsatisfiable)
        #expect(RangeRequest.parse("bytes=-0", size: size) == .unsatisfiable)
        #expect(RangeRequest.parse("bytes=0-1", size: 0) == .unsatisfiable)
        #expect(RangeRequest.parse("bytes=5-1", size: size) == .whole)
        #expect(RangeRequest.parse("bytes=0-1,3-4", size: size) == .whole)
        #expect(RangeRequest.parse("bytes=a-b", size: size) == .whole)
        #expect(RangeRequest.parse("bytes=-", size: size) == .whole)
        #expect(RangeRequest.parse("items=0-1", size: size) == .whole)
        #expect(EntityTags.weaklyMatches("W/\"a\", \"b\"", "\"a\""))
        #expect(EntityTags.weaklyMatches("*", "\"x\""))
        #expect(!EntityTags.weaklyMatches("\"ab\"", "\"a\""))
    }
}
