import Foundation
import TestSupport
import Testing

@testable import HTTPServer

/// Keep-alive, pipelining, Expect, HEAD/OPTIONS, routing and response framing over real sockets.
@Suite struct ConnectionTests {
    @Test(arguments: Transport.allCases) func keepAliveServesManyRequestsOnOneConnection(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        try await onThread {
            let client = try server.client()
            for index in 0..<5 {
                try client.send("GET /items/\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.text == "\(index)")
                #expect(response.header("Connection") == nil)
            }
        }
    }

    @Test(arguments: Transport.allCases) func connectionCloseIsHonoured(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let (response, closed) = try await onThread { try exchange(server, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") }
        #expect(response.status == 200)
        #expect(response.header("Connection") == "close")
        #expect(closed)
    }

    @Test(arguments: Transport.allCases) func http10KeepAliveIsOptIn(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        try await onThread {
            let client = try server.client()
            try client.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let first = try client.readResponse()
            #expect(first.header("Connection") == "keep-alive")
            try client.send("GET /hello HTTP/1.0\r\n\r\n")
            let second = try client.readResponse()
            #expect(second.status == 200)
            #expect(second.header("Connection") == "close")
            #expect(client.waitForClose())
        }
    }

    @Test(arguments: Transport.allCases) func hundredPipelinedRequestsAreAnsweredInOrder(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        try await onThread {
            let client = try server.client()
            // Mixed inline and blocking handlers: order must hold across both.
            let requests = (0..<100).map { index in
                index % 10 == 5 ? "GET /slow/1 HTTP/1.1\r\nHost: x\r\n\r\n" : "GET /items/\(index) HTTP/1.1\r\nHost: x\r\n\r\n"
            }
            try client.send(requests.joined())
            for index in 0..<100 {
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.text == (index % 10 == 5 ? "slow done" : "\(index)"))
            }
        }
    }

    @Test(arguments: Transport.allCases) func pipelinedRequestsWithBodies(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        try await onThread {
            let client = try server.client()
            var batch = ""
            for index in 0..<20 {
                let body = "body-\(index)"
                batch += "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            }
            try client.send(batch)
            for index in 0..<20 {
                #expect(try client.readResponse().text == "body-\(index)")
            }
        }
    }

    @Test(arguments: Transport.allCases) func requestSplitIntoSingleBytesIsParsed(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let response = try await onThread { () -> RawResponse in
            let client = try server.client()
            for byte in "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc".utf8 {
                try client.send([byte])
            }
            return try client.readResponse()
        }
        #expect(response.text == "abc")
    }

    @Test(arguments: Transport.allCases) func expectContinueGetsInterimResponseBeforeBody(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        try await onThread {
            let client = try server.client()
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            let interim = try client.readResponse()
            #expect(interim.status == 100)
            try client.send("hello")
            let final = try client.readResponse()
            #expect(final.status == 200)
            #expect(final.text == "hello")
        }
    }

    @Test(arguments: Transport.allCases) func expectContinueWithOversizedBodyGets413WithoutContinue(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let response = try await onThread { () -> RawResponse in
            let client = try server.client()
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\nExpect: 100-continue\r\n\r\n")
            return try client.readResponse()
        }
        #expect(response.status == 413)
    }

    @Test func unknownExpectationIs417() async throws {
        let server = try TestServer()
        let (response, closed) = try await onThread {
            try exchange(server, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: something-else\r\n\r\nhello")
        }
        #expect(response.status == 417)
        #expect(response.problemCode == "expectationFailed")
        #expect(closed)
    }

    @Test func headIsServedByGetRouteWithoutBody() async throws {
        let server = try TestServer()
        try await onThread {
            let client = try server.client()
            try client.send("HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.readResponse(head: true)
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "5")
            // The next response follows immediately: the HEAD response carried no body.
            let get = try client.readResponse()
            #expect(get.text == "hello")
        }
    }

    @Test func optionsListsAllowedMethods() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "OPTIONS /items/7 HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.status == 204)
        #expect(response.header("Allow") == "GET, HEAD, DELETE, OPTIONS")
        #expect(response.header("Content-Length") == nil)
    }

    @Test func rootPathAndAsteriskOptions() async throws {
        let server = try TestServer()
        let (root, _) = try await onThread { try exchange(server, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(root.text == "root")
        let (options, _) = try await onThread { try exchange(server, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(options.status == 204)
        #expect(options.header("Allow") == "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
    }

    @Test func aRepeatedDeferredAnswerNeverReachesTheNextRequest() async throws {
        let server = try TestServer()
        try await onThread {
            let client = try server.client()
            try client.send("GET /twice HTTP/1.1\r\nHost: x\r\n\r\nGET /slow/50 HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "first")
            #expect(try client.readResponse().text == "slow done")
            #expect(try client.readResponse().text == "hello")
        }
    }

    @Test func unknownPathIs404Problem() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.status == 404)
        #expect(response.header("Content-Type") == "application/problem+json")
        let problem = try #require(response.problem)
        #expect(problem["status"] as? Int == 404)
        #expect(problem["title"] as? String == "Not Found")
        #expect(problem["instance"] as? String == "/nowhere")
        #expect(problem["type"] as? String == "about:blank")
    }

    @Test(arguments: ["/hello/", "//hello", "/items/", "/items//x"])
    func pathsAreMatchedStrictly(_ path: String) async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.status == 404)
    }

    @Test func wrongMethodIs405WithAllow() async throws {
        let server = try TestServer()
        let (response, closed) = try await onThread { try exchange(server, "PUT /items/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n") }
        #expect(response.status == 405)
        #expect(response.header("Allow") == "GET, HEAD, DELETE, OPTIONS")
        #expect(response.problemCode == "methodNotAllowed")
        #expect(!closed, "a routing error keeps the connection")
    }

    @Test func pathParametersArePercentDecoded() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET /items/a%20b%2Fc HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.text == "a b/c")
    }

    /// Routing compares decoded segments: a literal written with escapes is the literal,
    /// an escaped `/` stays inside its segment, and a parameter may hold any UTF-8.
    @Test func escapedSegmentsAreMatchedDecoded() async throws {
        let server = try TestServer()
        let (hello, _) = try await onThread { try exchange(server, "GET /h%65llo HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(hello.status == 200)
        #expect(hello.text == "hello")
        let (split, _) = try await onThread { try exchange(server, "GET /items%2Fx HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(split.status == 404, "an escaped slash does not split a segment")
        let (item, _) = try await onThread { try exchange(server, "GET /%69tems/%C3%A9t%C3%A9 HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(item.text == "été")
        let (invalid, _) = try await onThread { try exchange(server, "GET /items/%C3 HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(invalid.status == 400)
        #expect(invalid.problemCode == "invalidPath")
    }

    @Test func queryItemsAreDecoded() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET /query?a=1&b=x+y&c=%C3%A9&d HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.text == "a=1&b=x y&c=é&d=")
    }

    @Test func headersAreCaseInsensitive() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET /header HTTP/1.1\r\nhost: x\r\nx-PROBE:  \t value with spaces \t\r\n\r\n") }
        #expect(response.text == "value with spaces")
    }

    @Test func responsesCarryDateAndExactContentLength() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.header("Content-Length") == "5")
        let date = try #require(response.header("Date"))
        #expect(date.hasSuffix(" GMT"))
        #expect(date.count == 29, "IMF-fixdate, e.g. Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test func everyResponseCarriesARequestID() async throws {
        let server = try TestServer()
        try await onThread {
            let client = try server.client()
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            let first = try #require(try client.readResponse().header("X-Request-Id"))
            let second = try #require(try client.readResponse().header("X-Request-Id"))
            #expect(first.count == 16 && first.allSatisfy(\.isHexDigit))
            #expect(first != second)
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Request-Id: client-abc.123:7\r\n\r\n")
            #expect(try client.readResponse().header("X-Request-Id") == "client-abc.123:7")
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Request-Id: has spaces\r\n\r\n")
            #expect(try client.readResponse().header("X-Request-Id")?.count == 16, "an unsafe id is replaced")
            try client.send("GET /nowhere HTTP/1.1\r\nHost: x\r\nX-Request-Id: trace-1\r\n\r\n")
            let problem = try client.readResponse()
            #expect(problem.header("X-Request-Id") == "trace-1")
            #expect(problem.problem?["requestId"] as? String == "trace-1")
        }
        let (rejected, _) = try await onThread { try exchange(server, "GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") }
        #expect(rejected.status == 400)
        #expect(rejected.problem?["requestId"] as? String == rejected.header("X-Request-Id"))
    }

    @Test func noContentHasNoContentLength() async throws {
        let server = try TestServer()
        let (response, _) = try await onThread { try exchange(server, "DELETE /items/1 HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(response.status == 204)
        #expect(response.header("Content-Length") == nil)
    }

    @Test func handlerErrorsAreProblemsWithoutInternals() async throws {
        let server = try TestServer()
        try await onThread {
            let client = try server.client()
            try client.send("GET /fail HTTP/1.1\r\nHost: x\r\n\r\n")
            let failure = try client.readResponse()
            #expect(failure.status == 500)
            #expect(!failure.text.contains("secret"))
            #expect(failure.problemCode == "internalError")
            try client.send("GET /teapot HTTP/1.1\r\nHost: x\r\n\r\n")
            let teapot = try client.readResponse()
            #expect(teapot.status == 418)
            #expect(teapot.reason == "I'm a teapot")
            #expect(teapot.problemCode == "teapot")
            // The connection survives handler errors.
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
    }

    @Test func asyncAndBlockingHandlersAnswer() async throws {
        let server = try TestServer()
        try await onThread {
            // A long wait: the async handler needs a thread of the cooperative pool, which
            // other tests' synchronous store work can hold for seconds on a busy machine.
            let client = try RawClient(port: server.port, receiveTimeout: 60)
            try client.send("GET /async HTTP/1.1\r\nHost: x\r\n\r\nGET /slow/5 HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "async done")
            #expect(try client.readResponse().text == "slow done")
        }
    }

    @Test func thousandConcurrentKeepAliveConnectionsAreEachServed() async throws {
        try await onThread {
            // Idle connections must outlive sending and reading a thousand requests on a
            // loaded machine (tests run in parallel, other thousands of connections too).
            let server = try TestServer {
                $0.loopThreads = 2
                $0.headTimeout = .seconds(30)
                $0.keepAliveTimeout = .seconds(30)
            }
            // From ten loopback addresses: each stays under the per-address connection limit.
            let clients = try (0..<1000).map { try server.client(from: "127.0.1.\($0 % 10 + 1)") }
            for (index, client) in clients.enumerated() {
                try client.send("GET /items/\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
            }
            for (index, client) in clients.enumerated() {
                #expect(try client.readResponse().text == "\(index)")
            }
            // All of them are still open and usable.
            for (index, client) in clients.enumerated() where index % 100 == 0 {
                try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try client.readResponse().status == 200)
            }
            #expect(server.server.openConnections == 1000)
        }
    }

    @Test func connectionsOverTheLimitGet503() async throws {
        let server = try TestServer { $0.maxConnections = 2 }
        try await onThread {
            let first = try server.client()
            let second = try server.client()
            try first.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            try second.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try first.readResponse().status == 200)
            #expect(try second.readResponse().status == 200)
            let third = try server.client()
            let refused = try third.readResponse()
            #expect(refused.status == 503)
            #expect(refused.problemCode == "tooManyConnections")
        }
    }
}
