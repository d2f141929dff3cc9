import Foundation
import TestSupport
import Testing

@testable import HTTPServer

/// Every parser rule, over a real socket: exact bytes in, exact status and closure out.
@Suite struct ParserRuleTests {
    /// A malformed request is answered with `status` and `code`, and the connection
    /// closed, in plaintext and over TLS alike.
    private func expectRejected(_ request: String, status: Int, code: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for transport in Transport.allCases {
            try await expectRejected(request, status: status, code: code, over: transport, sourceLocation: sourceLocation)
        }
    }

    private func expectRejected(
        _ request: String, status: Int, code: String, over transport: Transport,
        sourceLocation: SourceLocation
    ) async throws {
        let server = try TestServer(transport)
        let (response, closed) = try await onThread { try exchange(server, request) }
        #expect(response.status == status, "\(request.debugDescription)", sourceLocation: sourceLocation)
        #expect(response.problemCode == code, sourceLocation: sourceLocation)
        #expect(response.header("Content-Type") == "application/problem+json", sourceLocation: sourceLocation)
        #expect(response.header("Connection") == "close", sourceLocation: sourceLocation)
        #expect(closed, "connection must be closed after \(status)", sourceLocation: sourceLocation)
        // The server is still healthy for everyone else.
        let next = try await onThread { try exchange(server, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(next.response.status == 200, sourceLocation: sourceLocation)
    }

    /// The byte classes the parser tests each byte against are exactly the RFCs' lists.
    @Test func byteClassesAreTheRFCLists() {
        let alphanumerics = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        let token = alphanumerics.union("!#$%&'*+-.^_`|~".utf8)  // RFC 9110 §5.6.2 tchar
        let target = alphanumerics.union("-._~!$&'()*+,;=:@/?%".utf8)  // RFC 3986 pchar, "/", "?"
        for byte in UInt8.min...UInt8.max {
            #expect(ASCII.isToken(byte) == token.contains(byte), "\(byte)")
            #expect(ASCII.isTarget(byte) == target.contains(byte), "\(byte)")
        }
    }

    @Test func requestLineOverLimitIs414() async throws {
        let path = "/" + String(repeating: "a", count: 8 * 1024)
        try await expectRejected("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n", status: 414, code: "requestLineTooLong")
    }

    @Test(arguments: Transport.allCases) func requestLineAtLimitIsAccepted(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        // "GET " + path + " HTTP/1.1" is exactly 8 KiB.
        let path = "/items/" + String(repeating: "a", count: 8 * 1024 - 4 - 9 - 7)
        let (response, _) = try await onThread { try exchange(server, "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.status == 200)
    }

    @Test(arguments: Transport.allCases) func requestLineAtLimitIsAcceptedWhenItsCRLFArrivesSplit(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let path = "/items/" + String(repeating: "a", count: 8 * 1024 - 4 - 9 - 7)
        let response = try await onThread { () -> RawResponse in
            let client = try server.client()
            try client.send("GET \(path) HTTP/1.1\r")
            usleep(50_000)
            try client.send("\nHost: x\r\n\r\n")
            return try client.readResponse()
        }
        #expect(response.status == 200)
    }

    @Test func headerLineOverLimitIs431() async throws {
        let value = String(repeating: "v", count: 8 * 1024)
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: \(value)\r\n\r\n", status: 431, code: "headerLineTooLong")
    }

    @Test func headOverLimitIs431() async throws {
        let fields = (0..<40).map { "X-Field-\($0): \(String(repeating: "v", count: 1000))\r\n" }.joined()
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: x\r\n\(fields)\r\n", status: 431, code: "headTooLarge")
    }

    @Test func headerCountLimit() async throws {
        let server = try TestServer()
        let ninetyNine = (0..<99).map { "X-F\($0): v\r\n" }.joined()
        let accepted = try await onThread { try exchange(server, "GET /hello HTTP/1.1\r\nHost: x\r\n\(ninetyNine)\r\n") }
        #expect(accepted.response.status == 200, "100 fields including Host are allowed")
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: x\r\n\(ninetyNine)X-Last: v\r\n\r\n", status: 431, code: "tooManyHeaders")
    }

    @Test(arguments: Transport.allCases) func bodyOverLimitIs413BeforeTheBodyIsSent(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let response = try await onThread { () -> RawResponse in
            let client = try server.client()
            // Only the head is sent: the answer comes from Content-Length alone.
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(64 * 1024 + 1)\r\n\r\n")
            return try client.readResponse()
        }
        #expect(response.status == 413)
        #expect(response.problemCode == "contentTooLarge")
        #expect(response.header("Connection") == "close")
    }

    @Test(arguments: Transport.allCases) func bodyAtLimitIsAccepted(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let body = String(repeating: "b", count: 64 * 1024)
        let (response, _) = try await onThread {
            try exchange(server, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        }
        #expect(response.status == 200)
        #expect(response.body.count == 64 * 1024)
    }

    @Test func chunkedBodyOverLimitIs413() async throws {
        let chunk = String(repeating: "c", count: 40 * 1024)
        let hex = String(chunk.utf8.count, radix: 16)
        try await expectRejected(
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\(hex)\r\n\(chunk)\r\n\(hex)\r\n\(chunk)\r\n0\r\n\r\n",
            status: 413, code: "contentTooLarge")
    }

    @Test(arguments: ["+5", "-0", "5 5", "0x5", "5a", "", "99999999999999999999999", "5,6", "5,"])
    func invalidContentLengthIs400(_ value: String) async throws {
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(value)\r\n\r\nhello", status: 400, code: "invalidContentLength")
    }

    @Test func twoDifferentContentLengthsAre400() async throws {
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", status: 400, code: "invalidContentLength")
    }

    @Test func repeatedIdenticalContentLengthIsOneValue() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread {
            try exchange(server, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello")
        }
        #expect(response.status == 200)
        #expect(response.text == "hello")
    }

    @Test func contentLengthWithTransferEncodingIs400() async throws {
        try await expectRejected(
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            status: 400, code: "conflictingFraming")
    }

    @Test(arguments: ["gzip", "gzip, chunked", "chunked, gzip", "chunked, chunked", "identity"])
    func transferCodingOtherThanFinalChunkedIs501(_ coding: String) async throws {
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \(coding)\r\n\r\n0\r\n\r\n", status: 501, code: "unsupportedTransferCoding")
    }

    @Test func chunkedBodyIsDecoded() async throws {
        let server = try TestServer()
        let request =
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: ignored\r\n\r\n"
        let (response, _) = try await onThread { try exchange(server, request) }
        #expect(response.status == 200)
        #expect(response.text == "hello 0123456789")
    }

    @Test(arguments: [
        "zz\r\nhello\r\n0\r\n\r\n",  // not hex
        "\r\nhello\r\n0\r\n\r\n",  // no size
        "1000000000000000\r\nx\r\n0\r\n\r\n",  // 16 hex digits
        "5\r\nhelloXX0\r\n\r\n",  // no CRLF after data
        "5\nhello\r\n0\r\n\r\n",  // bare LF after size
        "5\r\nhello\r\n0\r\n X: folded\r\n\r\n",  // obs-fold in trailers
        "5 junk\r\nhello\r\n0\r\n\r\n",  // whitespace not followed by an extension
        "5\r\nhello\r\n0\r\nno colon\r\n\r\n",  // trailer line without a colon
    ])
    func malformedChunksAre400(_ body: String) async throws {
        let server = try TestServer()
        let (response, closed) = try await onThread {
            try exchange(server, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\(body)")
        }
        #expect(response.status == 400)
        #expect(closed)
    }

    @Test func chunkSizeLineIsBounded() async throws {
        let extensions = ";" + String(repeating: "e", count: 2000)
        try await expectRejected("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\(extensions)\r\nhello\r\n0\r\n\r\n", status: 400, code: "invalidChunk")
    }

    @Test func obsFoldIs400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n", status: 400, code: "obsoleteLineFolding")
    }

    @Test func bareCarriageReturnIs400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", status: 400, code: "invalidLineEnding")
    }

    @Test func bareLineFeedIs400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\nHost: x\r\n\r\n", status: 400, code: "invalidLineEnding")
    }

    @Test func whitespaceBeforeColonIs400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\r\nHost : x\r\n\r\n", status: 400, code: "whitespaceBeforeColon")
    }

    @Test func controlCharacterInValueIs400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: x\r\nX-A: a\u{01}b\r\n\r\n", status: 400, code: "invalidHeaderValue")
    }

    @Test func missingHostOnHTTP11Is400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\r\nX-A: a\r\n\r\n", status: 400, code: "missingHost")
    }

    @Test func duplicateHostIs400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400, code: "duplicateHost")
    }

    @Test func invalidHostIs400() async throws {
        try await expectRejected("GET /hello HTTP/1.1\r\nHost: a/b\r\n\r\n", status: 400, code: "invalidHost")
    }

    @Test func http10WithoutHostIsAccepted() async throws {
        let server = try TestServer()
        let (response, closed) = try await onThread { try exchange(server, "GET /hello HTTP/1.0\r\n\r\n") }
        #expect(response.status == 200)
        #expect(response.header("Connection") == "close")
        #expect(closed)
    }

    @Test(arguments: ["HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "http/1.1", "HTTP/1.10", "HTTP/1"])
    func unsupportedVersionIs400(_ version: String) async throws {
        try await expectRejected("GET /hello \(version)\r\nHost: x\r\n\r\n", status: 400, code: "unsupportedVersion")
    }

    @Test(arguments: ["GET  /hello HTTP/1.1", "GET /hello  HTTP/1.1", "GET /hello", "GET"])
    func malformedRequestLineIs400(_ line: String) async throws {
        let server = try TestServer()
        let (response, closed) = try await onThread { try exchange(server, "\(line)\r\nHost: x\r\n\r\n") }
        #expect(response.status == 400)
        #expect(closed)
    }

    @Test(arguments: ["/a%zz", "/a%2", "/a%"])
    func invalidPercentEncodingIs400(_ target: String) async throws {
        try await expectRejected("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n", status: 400, code: "invalidPercentEncoding")
    }

    @Test(arguments: ["/a<b", "/a\"b", "/a{b}", "/a\\b", "/a#frag", "/caf\u{E9}", "hello", "/a|b"])
    func invalidTargetBytesAre400(_ target: String) async throws {
        try await expectRejected("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n", status: 400, code: "invalidTarget")
    }

    @Test func percentDecodedToInvalidUTF8Is400() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET /items/%FF HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.status == 400)
        #expect(response.problemCode == "invalidPath")
    }

    @Test(arguments: ["BREW", "TRACE", "CONNECT"])
    func unimplementedMethodIs405OnAKnownPathAnd501Elsewhere(_ method: String) async throws {
        let server = try TestServer()
        try await onThread {
            let client = try server.client()
            try client.send("\(method) /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            let known = try client.readResponse()
            #expect(known.status == 405)
            #expect(known.header("Allow") == "GET, HEAD, OPTIONS")
            try client.send("\(method) /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
            let unknown = try client.readResponse()
            #expect(unknown.status == 501)
            #expect(unknown.problemCode == "methodNotImplemented")
            // The body was framed, so the connection stays usable.
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
    }

    @Test func invalidMethodTokenIs400() async throws {
        try await expectRejected("GE(T /hello HTTP/1.1\r\nHost: x\r\n\r\n", status: 400, code: "invalidMethod")
    }

    @Test func absoluteFormTargetIsRouted() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET http://example.com/items/42?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n") }
        #expect(response.status == 200)
        #expect(response.text == "42")
    }

    @Test func leadingEmptyLineIsIgnored() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.status == 200)
    }

    @Test func oneMebibyteHeaderLineIsRefusedEarlyAndMemoryStaysFlat() async throws {
        let server = try TestServer()
        try await onThread {
            for _ in 0..<8 {
                let client = try server.client()
                try client.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Huge: ")
                // 16 KiB of the line is enough for the verdict: it comes before the rest is sent.
                try client.send([UInt8](repeating: UInt8(ascii: "h"), count: 16 * 1024))
                let response = try client.readResponse()
                #expect(response.status == 431)
                // The rest of the mebibyte is read and discarded while the server lingers, or refused.
                try? client.send([UInt8](repeating: UInt8(ascii: "h"), count: 1024 * 1024 - 16 * 1024))
            }
            // No connection ever buffered more than a few read chunks of it.
            #expect(server.server.peakInputBufferBytes <= 64 * 1024, "peak input buffer \(server.server.peakInputBufferBytes) bytes")
            let fresh = try exchange(server, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(fresh.response.status == 200)
        }
    }
}
