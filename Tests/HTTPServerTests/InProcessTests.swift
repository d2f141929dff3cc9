import Foundation
import Testing

@testable import HTTPServer

/// Requests answered in process (``HTTPServer/respond(to:)``), without a socket.
@Suite struct InProcessTests {
    static func server() throws -> HTTPServer {
        var router = TestServer.router()
        router.add(.GET, "/never", .deferred { _, _ in }.timeout(.milliseconds(100)))
        return try HTTPServer(configuration: TestServer.configuration(), router: router)
    }

    @Test func routesHandlersAndRoutingErrorsAnswerWithoutASocket() async throws {
        let server = try Self.server()
        #expect(await server.respond(to: HTTPRequest(method: .GET, path: "/items/42")).body == Array("42".utf8))
        #expect(await server.respond(to: HTTPRequest(method: .GET, path: "/async")).body == Array("async done".utf8))
        #expect(await server.respond(to: HTTPRequest(method: .GET, path: "/slow/1")).body == Array("slow done".utf8))
        // A deferred handler's first answer counts, as on a connection.
        #expect(await server.respond(to: HTTPRequest(method: .GET, path: "/twice")).body == Array("first".utf8))
        let head = await server.respond(to: HTTPRequest(method: .HEAD, path: "/hello"))
        #expect(head.status == .ok && head.body.isEmpty)
        #expect(await server.respond(to: HTTPRequest(method: .GET, path: "/nowhere")).status.code == 404)
        let wrongMethod = await server.respond(to: HTTPRequest(method: .PATCH, path: "/hello"))
        #expect(wrongMethod.status.code == 405)
        let tooLarge = HTTPRequest(method: .POST, path: "/echo", body: Array(repeating: 0, count: 64 * 1024 + 1))
        #expect(await server.respond(to: tooLarge).status.code == 413)
    }

    @Test func aDeferredAnswerNeverGivenExpiresAtTheRoutesTimeout() async throws {
        let server = try Self.server()
        let response = await server.respond(to: HTTPRequest(method: .GET, path: "/never"))
        #expect(response.status.code == 503)
    }
}
