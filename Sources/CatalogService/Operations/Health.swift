import CatalogStore
import HTTPServer
import Synchronization

/// Operational endpoints.
enum Health {
    /// `GET /healthz`: the process is alive and serving.
    static let liveness = HTTPResponse.text("ok")

    /// `GET /readyz`: 200 only while the database answers with every migration applied
    /// and the server is not draining; otherwise a 503 problem, so a load balancer stops
    /// sending traffic.
    static func readiness(draining: Bool, databaseReady: Bool) throws -> HTTPResponse {
        if draining {
            throw APIError(status: .serviceUnavailable, code: "notReady", detail: "The server is shutting down.", headers: [("Retry-After", "1")])
        }
        guard databaseReady else {
            throw APIError(
                status: .serviceUnavailable, code: "notReady",
                detail: "The database does not answer or has migrations to apply.", headers: [("Retry-After", "1")])
        }
        return .text("ready")
    }
}

/// The server, once built, as the readiness check sees it.
final class ServerReference: Sendable {
    private let server = Mutex<HTTPServer?>(nil)
    private let limiter: RateLimiter?

    init(limiter: RateLimiter?) {
        self.limiter = limiter
    }

    func set(_ value: HTTPServer) { server.withLock { $0 = value } }

    /// Whether the server has begun a graceful shutdown.
    var isShuttingDown: Bool { server.withLock { $0?.isShuttingDown ?? false } }
    /// Requests whose handler has not answered yet.
    var inFlightRequests: Int { server.withLock { $0?.inFlightRequests ?? 0 } }
    /// Client connections open now.
    var openConnections: Int { server.withLock { $0?.openConnections ?? 0 } }
    /// What the server refused or gave up on before a handler answered, by reason.
    var rejections: [String: Int] {
        var reasons: [String: Int] = [:]
        for (rateClass, count) in limiter?.refused ?? [:] { reasons["rateLimited." + rateClass.rawValue] = count }
        return server.withLock { server in
            guard let server else { return reasons }
            return reasons.merging([
                "tooManyConnections": server.refusedConnections, "tooManyConnectionsFromAddress": server.refusedPerAddress,
                "bodyBufferFull": server.refusedBodies, "requestTimeout": server.expiredRequests,
                "clientGone": server.abandonedRequests, "blockingPoolFull": WorkPool.blocking.refused,
                "readPoolFull": ExpensiveReads.pool.refused, "tlsHandshakeFailed": server.failedHandshakes,
            ]) { $1 }
        }
    }
}
