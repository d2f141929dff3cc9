import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What an error renderer knows about the request that failed.
public struct ErrorContext: Sendable {
    /// The request path, when a request line was parsed.
    public let path: String?
    /// The request's id (its `X-Request-Id`), also sent as a response header.
    public let requestID: String

    /// Creates a context.
    public init(path: String?, requestID: String) {
        self.path = path
        self.requestID = requestID
    }
}

/// Turns any error into a response.
public typealias ErrorRenderer = @Sendable (_ error: any Error, _ context: ErrorContext) -> HTTPResponse

/// State shared, read-only, by every event loop of a server.
final class ServerCore: Sendable {
    let configuration: ServerConfiguration
    let router: Router
    let renderError: ErrorRenderer
    let openConnections = Atomic<Int>(0)
    /// Requests handed to deferred handlers and not yet answered.
    let inFlight = Atomic<Int>(0)
    /// Connections turned away at the connection limit.
    let refusedConnections = Atomic<Int>(0)
    /// The largest input buffer any connection has needed, in bytes.
    let peakInputBuffer = Atomic<Int>(0)
    /// Connections turned away at the per-address limit.
    let refusedPerAddress = Atomic<Int>(0)
    /// Bodies refused because the body buffer budget was spent.
    let refusedBodies = Atomic<Int>(0)
    /// Deferred requests that passed their deadline.
    let expiredRequests = Atomic<Int>(0)
    /// Deferred requests whose client left before the answer.
    let abandonedRequests = Atomic<Int>(0)
    /// Bytes of partly received bodies held now.
    let bufferedBodyBytes = Atomic<Int>(0)
    /// TLS handshakes that failed (including plaintext requests to a TLS listener).
    let failedHandshakes = Atomic<Int>(0)
    /// Reads of input OpenSSL held that epoll could not report (see ``EventLoop/readSoon(_:)``).
    let bufferedReadPasses = Atomic<Int>(0)
    /// When a loop last had an event or a job, or closed a connection (monotonic
    /// milliseconds): what the quiet spell before returning freed memory counts from.
    let lastActive = Atomic<Int64>(EventLoop.monotonicMilliseconds())
    /// The ``lastActive`` after which freed memory was last returned (once per quiet spell).
    let memoryReturnedAfter = Atomic<Int64>(-1)
    /// When freed memory was last returned (monotonic milliseconds).
    let lastMemoryReturn = Atomic<Int64>(Int64.min / 2)
    /// How many times the server, quiet for ``ServerConfiguration/quietBeforeReturningMemory``,
    /// returned the process's freed memory to the kernel.
    let freedMemoryReturns = Atomic<Int>(0)
    /// Header lines every response carries (`Strict-Transport-Security`), rendered once.
    let fixedFields: [UInt8]
    /// Open connections by client address.
    private let connectionsByAddress = Mutex<[String: Int]>([:])
    /// Bytes of partly received bodies held now, by client address.
    private let bodyBytesByAddress = Mutex<[String: Int]>([:])
    /// The connections' timeouts (``ConnectionDeadlines``), in milliseconds.
    let timeouts: ConnectionDeadlines.Timeouts
    /// The parser's limits: the server's, with a body as large as the largest any route
    /// reads (``Handler/allowingBody(upTo:)``); each route's own is checked from the head.
    let parserLimits: ParserLimits

    init(configuration: ServerConfiguration, router: Router, renderError: @escaping ErrorRenderer) {
        self.configuration = configuration
        self.router = router
        self.renderError = renderError
        timeouts = ConnectionDeadlines.Timeouts(
            head: configuration.headTimeout.milliseconds, body: configuration.bodyTimeout.milliseconds,
            request: configuration.requestTimeout.milliseconds, keepAlive: configuration.keepAliveTimeout.milliseconds,
            linger: configuration.lingerTimeout.milliseconds)
        var parserLimits = configuration.limits
        parserLimits.maxBody = router.routes.reduce(configuration.limits.maxBody) { max($0, $1.handler.bodyLimit(server: configuration.limits.maxBody)) }
        self.parserLimits = parserLimits
        fixedFields = configuration.strictTransportSecurity.map { Array("Strict-Transport-Security: \($0)\r\n".utf8) } ?? []
    }

    /// Counts a connection from `address`; false (counting nothing) when that address
    /// is at its limit.
    func admit(_ address: String) -> Bool {
        connectionsByAddress.withLock { counts in
            let count = counts[address, default: 0]
            guard count < configuration.maxConnectionsPerAddress else { return false }
            counts[address] = count + 1
            return true
        }
    }

    /// Forgets a connection counted by ``admit(_:)``.
    func release(_ address: String) {
        connectionsByAddress.withLock { counts in
            if let count = counts[address], count > 1 { counts[address] = count - 1 } else { counts[address] = nil }
        }
    }

    /// Takes `bytes` from the body buffer budget for `client`, whose body may have `limit`
    /// bytes; false (taking nothing) when they do not fit in the whole budget or in that
    /// address's share of it (at least one body of the route's limit: only a route that
    /// takes large bodies lets an address hold that much).
    func reserveBody(_ bytes: Int, for client: String, limit: Int) -> Bool {
        let share = max(configuration.maxBufferedBodyBytesPerAddress, limit)
        let fits = bodyBytesByAddress.withLock { held in
            let total = held[client, default: 0] + bytes
            guard total <= share else { return false }
            held[client] = total
            return true
        }
        guard fits else {
            refusedBodies.add(1, ordering: .relaxed)
            return false
        }
        if bufferedBodyBytes.add(bytes, ordering: .relaxed).newValue > configuration.maxBufferedBodyBytes {
            releaseBody(bytes, for: client)
            refusedBodies.add(1, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Gives back `bytes` of the body buffer budget that `client` held.
    func releaseBody(_ bytes: Int, for client: String) {
        bufferedBodyBytes.subtract(bytes, ordering: .relaxed)
        bodyBytesByAddress.withLock { held in
            if let count = held[client], count > bytes { held[client] = count - bytes } else { held[client] = nil }
        }
    }

    func render(_ error: any Error, path: String?, requestID: String) -> HTTPResponse {
        renderError((error as? SendableError)?.error ?? error, ErrorContext(path: path, requestID: requestID))
    }
}

/// An HTTP/1.1 server on non-blocking POSIX sockets and epoll, with a fixed number of
/// event loop threads.
///
/// ```swift
/// var router = Router()
/// router.add(.GET, "/healthz", .inline { _ in .text("ok") })
/// let server = try HTTPServer(configuration: ServerConfiguration(), router: router)
/// try server.start()
/// server.runUntilSignal()   // graceful shutdown on SIGTERM or SIGINT
/// ```
public final class HTTPServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: ServerConfiguration
    let core: ServerCore
    private let loops: [EventLoop]
    private let state = Mutex(State())
    private let stopped = Latch()

    private struct State {
        var port = 0
        var started = false
        var shuttingDown = false
    }

    /// Renders ``HTTPError`` as its problem document and any other error as a bare 500
    /// problem that reveals nothing of the failure.
    public static let defaultErrorRenderer: ErrorRenderer = { error, context in
        let httpError =
            error as? HTTPError
            ?? HTTPError(.internalServerError, code: "internalError", detail: "The server failed to process the request.")
        return ProblemDocument.response(for: httpError, instance: context.path, extra: [("requestId", context.requestID)])
    }

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: ServerConfiguration, router: Router, errorRenderer: @escaping ErrorRenderer = HTTPServer.defaultErrorRenderer) throws {
        self.configuration = configuration
        let core = ServerCore(configuration: configuration, router: router, renderError: errorRenderer)
        self.core = core
        let loops = try (0..<max(1, configuration.loopThreads)).map { try EventLoop(index: $0, core: core) }
        loops[0].peers = loops
        self.loops = loops
    }

    /// The port the server listens on (the chosen one when configured with port 0).
    public var port: Int { state.withLock { $0.port } }

    /// Whether a graceful shutdown has begun (the server is draining or stopped).
    public var isShuttingDown: Bool { state.withLock { $0.shuttingDown } }

    /// Requests whose deferred handler has not answered yet.
    public var inFlightRequests: Int { core.inFlight.load(ordering: .relaxed) }

    /// Connections refused at ``ServerConfiguration/maxConnections`` since start.
    public var refusedConnections: Int { core.refusedConnections.load(ordering: .relaxed) }

    /// Connections refused at ``ServerConfiguration/maxConnectionsPerAddress`` since start.
    public var refusedPerAddress: Int { core.refusedPerAddress.load(ordering: .relaxed) }

    /// Request bodies refused at ``ServerConfiguration/maxBufferedBodyBytes`` since start.
    public var refusedBodies: Int { core.refusedBodies.load(ordering: .relaxed) }

    /// Requests answered 503 at ``ServerConfiguration/requestTimeout`` since start.
    public var expiredRequests: Int { core.expiredRequests.load(ordering: .relaxed) }

    /// Deferred requests whose client closed its connection before the answer, since start.
    public var abandonedRequests: Int { core.abandonedRequests.load(ordering: .relaxed) }

    /// Bytes of partly received request bodies held right now.
    public var bufferedBodyBytes: Int { core.bufferedBodyBytes.load(ordering: .relaxed) }

    /// TLS handshakes that failed since start, plaintext requests to a TLS listener among them.
    public var failedHandshakes: Int { core.failedHandshakes.load(ordering: .relaxed) }

    /// How many times each event loop has woken since start, each read on its own loop
    /// (which wakes it once more).
    var loopRounds: [Int] {
        loops.map { loop in
            let rounds = Mutex(0)
            let read = Latch()
            if !loop.execute({ loop in
                rounds.withLock { $0 = loop.rounds }
                read.open()
            }) {
                return -1
            }
            read.wait()
            return rounds.withLock { $0 }
        }
    }

    /// The number of client connections open right now.
    public var openConnections: Int { core.openConnections.load(ordering: .relaxed) }

    /// The largest input buffer any connection has grown to, in bytes: evidence that
    /// oversized requests are refused without being buffered.
    public var peakInputBufferBytes: Int { core.peakInputBuffer.load(ordering: .relaxed) }

    /// Binds the listening socket and starts the event loop threads.
    /// - Returns: the bound port.
    @discardableResult
    public func start() throws -> Int {
        guard !state.withLock({ $0.started }) else { throw SystemError("start: the server was already started", errno: EINVAL) }
        signal(SIGPIPE, SIG_IGN)
        Socket.raiseDescriptorLimit()
        let (fd, port) = try Socket.listen(host: configuration.host, port: configuration.port, backlog: configuration.backlog)
        try loops[0].listen(on: fd)
        state.withLock {
            $0.port = port
            $0.started = true
        }
        let remaining = Mutex(loops.count)
        for loop in loops {
            let thread = Thread { [stopped] in
                loop.run()
                if remaining.withLock({ count -> Int in
                    count -= 1; return count
                }) == 0 {
                    stopped.open()
                }
            }
            thread.name = "http-loop-\(loop.index)"
            thread.stackSize = 1 << 20
            thread.start()
        }
        return port
    }

    /// Starts a graceful shutdown and returns at once: stop accepting, close idle
    /// connections, let requests in flight finish, then close whatever is left when
    /// ``ServerConfiguration/shutdownTimeout`` runs out.
    public func beginShutdown() {
        let first = state.withLock { state -> Bool in
            guard state.started, !state.shuttingDown else { return false }
            state.shuttingDown = true
            return true
        }
        guard first else { return }
        let deadline = EventLoop.monotonicMilliseconds() + configuration.shutdownTimeout.milliseconds
        for loop in loops { loop.execute { $0.beginDrain(deadline: deadline) } }
    }

    /// Blocks until every event loop has stopped.
    public func waitUntilStopped() {
        guard state.withLock({ $0.started }) else { return }
        stopped.wait()
    }

    /// Shuts down gracefully and waits until the server has stopped.
    public func shutdown() {
        beginShutdown()
        waitUntilStopped()
    }

    /// Blocks `signals` in the calling thread and so in every thread it starts later: one
    /// that arrives before ``runUntilSignal(_:)`` waits for it (pending) instead of being
    /// lost in the moment between ignoring it and a handler taking it. Call it first in
    /// `main`, before any other thread starts.
    public static func holdSignals(_ signals: [Int32] = [SIGTERM, SIGINT]) {
        var set = signalSet(signals)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        held.withLock { $0.formUnion(signals) }
    }

    /// The signals ``holdSignals(_:)`` has held (a thread's mask alone does not say: some
    /// threads start with every signal blocked).
    private static let held = Mutex<Set<Int32>>([])

    private static func signalSet(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for number in signals { sigaddset(&set, number) }
        return set
    }

    /// Blocks until one of `signals` arrives, then shuts down gracefully and returns once
    /// the server has stopped. When the signals are held (``holdSignals(_:)``), a thread
    /// waits for them with `sigwait`, so one sent while the server started is answered.
    public func runUntilSignal(_ signals: [Int32] = [SIGTERM, SIGINT]) {
        if Self.held.withLock({ $0.isSuperset(of: signals) }) {
            let waiter = Thread { [self] in
                var set = Self.signalSet(signals)
                var number: Int32 = 0
                sigwait(&set, &number)
                beginShutdown()
            }
            waiter.name = "signals"
            waiter.start()
            waitUntilStopped()
            return
        }
        let sources = signals.map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in beginShutdown() }
            source.resume()
            return source
        }
        waitUntilStopped()
        for source in sources { source.cancel() }
    }
}

/// A one-shot gate: `wait` blocks until `open` has been called.
final class Latch: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    func wait() {
        condition.lock()
        while !isOpen { condition.wait() }
        condition.unlock()
    }
}
