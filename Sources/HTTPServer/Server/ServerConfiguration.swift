#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Everything the server needs to know before it starts.
public struct ServerConfiguration: Sendable {
    /// The address to listen on; `127.0.0.1` by default, `0.0.0.0` for every IPv4 interface.
    public var host = "127.0.0.1"
    /// The TCP port; 0 picks a free one (read it back from ``HTTPServer/port``).
    public var port = 8080
    /// How many event loop threads serve connections; one per core by default.
    public var loopThreads = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    /// Size limits of request heads and bodies.
    public var limits = ParserLimits()
    /// How long a client has to send a whole request head, from its first byte
    /// (or from connecting, for the first request). Exceeded: 408 and close.
    public var headTimeout: Duration = .seconds(10)
    /// How long a client has to send a whole request body, from the end of its head
    /// (a total, not an idle timer: a byte now and then does not extend it). Exceeded:
    /// 408 and close. A client that stops reading its response gets the same bound
    /// between two writes that make progress.
    public var bodyTimeout: Duration = .seconds(30)
    /// How long a request handed to a deferred handler may wait for its answer, queued
    /// or running. Exceeded: 503 with `Retry-After`, the connection is closed and the
    /// request is marked abandoned (see ``Responder/isAbandoned``).
    public var requestTimeout: Duration = .seconds(60)
    /// How long an idle keep-alive connection stays open between requests.
    public var keepAliveTimeout: Duration = .seconds(75)
    /// How long a graceful shutdown waits for requests in flight before closing everything.
    public var shutdownTimeout: Duration = .seconds(10)
    /// How long the server keeps draining a client's input after it decided to close,
    /// so the final response is not destroyed by a TCP reset.
    public var lingerTimeout: Duration = .seconds(2)
    /// How long the server (every loop, no request in flight) goes without events or jobs
    /// before one loop hands the memory malloc holds freed back to the kernel: once per
    /// quiet spell, and at most once every five seconds. `nil`: never.
    public var quietBeforeReturningMemory: Duration? = .seconds(1)
    /// The most connections open at once; further ones are answered 503 and closed.
    public var maxConnections = 10_000
    /// The most connections open at once from one client address (an IPv6 client's
    /// whole /64); further ones are answered 503 and closed, so one client cannot take
    /// every connection.
    public var maxConnectionsPerAddress = 128
    /// The most bytes of request bodies held across all connections while they arrive
    /// (counted as they arrive); a body that would go over is answered 503 with
    /// `Retry-After` and its connection closed.
    public var maxBufferedBodyBytes = 64 << 20
    /// The most of ``maxBufferedBodyBytes`` the bodies of one client address (an IPv6
    /// client's /64) may hold at once: its fair share, so that one address stalling many
    /// bodies cannot refuse everyone else's (a body that would go over is answered 503 like
    /// one over the whole budget). At least the body limit of the request's route counts, so
    /// one body of its largest size always fits (only routes that take large bodies, such
    /// as image uploads, let an address hold more than this).
    public var maxBufferedBodyBytesPerAddress = 4 << 20
    /// The proxies in front of the server whose word on the client's address is believed
    /// (`Forwarded`, `X-Forwarded-For` or the PROXY protocol, as they say); `nil` (the
    /// default): every client is its connection's peer, and forwarding fields are ignored.
    public var trustedProxies: TrustedProxies?
    /// Cross-origin access for browser apps; `nil` (the default) sends no CORS fields.
    public var cors: CORSPolicy?
    /// The certificate and key of a listener that speaks TLS only; `nil` (the default)
    /// for plaintext. The handshake counts against ``headTimeout``.
    public var tls: TLSContext?
    /// The value of a `Strict-Transport-Security` field on every response, such as
    /// `max-age=63072000`; `nil` (the default) sends none.
    public var strictTransportSecurity: String?
    /// The listen backlog.
    public var backlog: Int32 = 1024
    /// Called on the event loop after every response is queued (for access logs and
    /// metrics); it must be quick and must not block.
    public var requestObserver: (@Sendable (CompletedRequest) -> Void)?

    /// The defaults above.
    public init() {}
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// One answered request, as the request observer sees it.
public struct CompletedRequest: Sendable {
    /// The method token, or `-` when the request could not be parsed.
    public let method: String
    /// The request path, or `-` when the request could not be parsed.
    public let path: String
    /// The route pattern that matched (such as `/v1/games/{id}`), or `nil` when none did.
    public let route: String?
    /// The response status code.
    public let status: Int
    /// The response body's size in bytes.
    public let bytes: Int
    /// From the end of the request head (or the failure) to the queued response.
    public let durationMicroseconds: Int
    /// The request's `X-Request-Id`.
    public let requestID: String
    /// The client's address.
    public let remoteAddress: String
}
