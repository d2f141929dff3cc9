import Foundation
import Synchronization

/// A route's request handler, and where it runs.
///
/// Handlers are plain Swift functions from ``HTTPRequest`` to ``HTTPResponse``. Choose
/// where each runs by how long it may take:
/// - ``inline(_:)`` runs on the connection's event loop thread: the fastest path, for
///   work measured in microseconds that never blocks (in-memory answers, short reads).
/// - ``blocking(_:)`` runs on a pool of threads reserved for blocking work (file I/O,
///   `fsync`, waiting on a lock), so the event loop keeps serving other connections.
/// - ``async(_:)`` runs as a Swift concurrency task.
///
/// A thrown error is turned into a response by the server's error renderer.
public struct Handler: Sendable {
    enum Kind: Sendable {
        case inline(@Sendable (HTTPRequest) throws -> HTTPResponse)
        case deferred(@Sendable (HTTPRequest, Responder) -> Void)
        case either(@Sendable (HTTPRequest, Responder) throws -> HTTPResponse?)
    }

    let kind: Kind
    /// How long a request may wait for a deferred answer; `nil`: the server's
    /// ``ServerConfiguration/requestTimeout``.
    private(set) var timeout: Duration?
    /// The largest body the route reads; `nil`: the server's ``ParserLimits/maxBody``.
    private(set) var maxBody: Int?
    /// Whether ``maxBody`` may pass the server's limit (``allowingBody(upTo:)``).
    private(set) var maxBodyPassesServerLimit = false
    /// What a request with a body must pass once its head has arrived, before any body
    /// byte is buffered (see ``admitting(_:)``).
    private(set) var admission: (@Sendable (HTTPRequest) throws -> (any AnyObject & Sendable)?)?
    /// Whether the handler takes its body as a stream (``streamingBody()``).
    private(set) var streamsBody = false
    /// Fields an `OPTIONS` request of the route's path is answered with (``describingOptions(_:)``).
    private(set) var optionsFields: [(name: String, value: String)] = []

    init(kind: Kind) {
        self.kind = kind
    }

    /// This handler with its own request deadline (for work known to take long, such as
    /// a backup), in place of the server's ``ServerConfiguration/requestTimeout``.
    public func timeout(_ timeout: Duration) -> Handler {
        var handler = self
        handler.timeout = timeout
        return handler
    }

    /// This handler reading bodies of at most `bytes` (413 beyond, decided from
    /// `Content-Length` before the body is read, and counted while decoding chunks); the
    /// server's ``ParserLimits/maxBody`` still bounds it.
    public func limitingBody(to bytes: Int) -> Handler {
        var handler = self
        handler.maxBody = bytes
        return handler
    }

    /// This handler reading bodies of at most `bytes`, even where that is more than the
    /// server's ``ParserLimits/maxBody`` (an image upload): 413 beyond, as for
    /// ``limitingBody(to:)``.
    public func allowingBody(upTo bytes: Int) -> Handler {
        var handler = limitingBody(to: bytes)
        handler.maxBodyPassesServerLimit = true
        return handler
    }

    /// This handler running once the head has arrived, before any of the body is read,
    /// and taking the body as a stream: ``HTTPRequest/body`` is empty, and the handler hands
    /// a ``RequestBodySink`` to ``Responder/receiveBody(into:)`` when it wants the body
    /// (or answers at once to refuse it). For bodies too large to hold, which never count
    /// against the server's budget of buffered bodies; `Expect: 100-continue` is answered
    /// only when the body is taken. The body's limit (``allowingBody(upTo:)``) still holds.
    /// A handler that answers at once must be deferred or ``either(_:)``.
    public func streamingBody() -> Handler {
        var handler = self
        handler.streamsBody = true
        return handler
    }

    /// This handler's path answering `OPTIONS` with `fields` besides `Allow` (what a
    /// protocol discovers there, such as tus's `Tus-Version`).
    public func describingOptions(_ fields: [(name: String, value: String)]) -> Handler {
        var handler = self
        handler.optionsFields = fields
        return handler
    }

    /// The largest body the route reads, where the server's limit is `server`.
    func bodyLimit(server: Int) -> Int {
        guard let maxBody else { return server }
        return maxBodyPassesServerLimit ? maxBody : min(server, maxBody)
    }

    /// This handler checking each request that has a body with `check` once its head has
    /// arrived, before any of the body is buffered: `check` sees the head (an empty body)
    /// and throws to refuse it (a credential that is missing, invalid or too weak), which
    /// answers at once with the error and closes the connection unless the whole body had
    /// already arrived. What it returns reaches the handler as ``HTTPRequest/admitted``
    /// (the caller it found, so the handler need not look again). It runs on the event
    /// loop: it must be quick and must not block.
    public func admitting(_ check: @escaping @Sendable (HTTPRequest) throws -> (any AnyObject & Sendable)?) -> Handler {
        var handler = self
        handler.admission = check
        return handler
    }

    /// A handler that runs on the event loop thread. It must not block.
    public static func inline(_ handle: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) -> Handler {
        Handler(kind: .inline(handle))
    }

    /// A handler that runs on the shared blocking-work pool.
    public static func blocking(_ handle: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) -> Handler {
        Handler(
            kind: .deferred { request, responder in
                WorkPool.blocking.run(for: responder) { try handle(request) }
            })
    }

    /// A handler that runs as a task.
    public static func async(_ handle: @escaping @Sendable (HTTPRequest) async throws -> HTTPResponse) -> Handler {
        Handler(
            kind: .deferred { request, responder in
                // A client waits for it: it runs before the process's background tasks.
                Task(priority: .high) {
                    do {
                        responder.respond(try await handle(request))
                    } catch {
                        responder.fail(error)
                    }
                }
            })
    }

    /// A handler that runs on the event loop thread and either answers at once (returning
    /// the response) or returns `nil` and answers later through the ``Responder``, from
    /// any thread, exactly once. For work that is usually quick but sometimes must wait
    /// (a credential seen for the first time). It must not block.
    public static func either(_ handle: @escaping @Sendable (HTTPRequest, Responder) throws -> HTTPResponse?) -> Handler {
        Handler(kind: .either(handle))
    }

    /// Runs `job` on the pool of threads reserved for blocking work.
    /// - Returns: false, without running it, when that pool's queue is full.
    @discardableResult
    public static func runBlocking(_ job: @escaping @Sendable () -> Void) -> Bool {
        WorkPool.blocking.submit(job)
    }

    /// A handler that receives a ``Responder`` and answers through it later, from any thread.
    /// It must answer exactly once; later answers are ignored.
    public static func deferred(_ handle: @escaping @Sendable (HTTPRequest, Responder) -> Void) -> Handler {
        Handler(kind: .deferred(handle))
    }
}

/// Whether the client of a deferred request still waits for its answer.
final class RequestTicket: Sendable {
    let abandoned = Atomic<Bool>(false)
}

/// Delivers the answer of a deferred handler back to its connection's event loop.
public struct Responder: Sendable {
    /// Where the answer goes.
    enum Target: Sendable {
        /// The request `sequence` of the connection `id` on `fd`, served by `loop`.
        case connection(EventLoop, fd: Int32, id: UInt64, sequence: UInt64)
        /// A request answered in process, without a socket (``HTTPServer/respond(to:)``).
        case inProcess(InProcessExchange)
    }

    let target: Target
    let ticket: RequestTicket

    init(loop: EventLoop, fd: Int32, connectionID: UInt64, sequence: UInt64, ticket: RequestTicket) {
        target = .connection(loop, fd: fd, id: connectionID, sequence: sequence)
        self.ticket = ticket
    }

    init(_ exchange: InProcessExchange) {
        target = .inProcess(exchange)
        ticket = RequestTicket()
    }

    /// Whether nobody waits for the answer any more: the client closed its connection
    /// or the request passed its deadline. Queued work for it can be dropped.
    public var isAbandoned: Bool { ticket.abandoned.load(ordering: .relaxed) }

    /// Sends `response` to the client.
    public func respond(_ response: HTTPResponse) {
        deliver(.success(response))
    }

    /// Sends the response the server's error renderer makes of `error`.
    public func fail(_ error: any Error) {
        deliver(.failure(SendableError(error)))
    }

    /// Runs `block` soon on the event loop that serves this request, after the jobs already
    /// queued there: for work that makes the answer, moved off a busy thread. Once the
    /// loop has stopped, `block` runs at once on the calling thread instead.
    public func perform(_ block: @escaping @Sendable () -> Void) {
        switch target {
        case let .connection(loop, _, _, _):
            if !loop.execute({ _ in block() }) { block() }
        case let .inProcess(exchange):
            exchange.perform(block)
        }
    }

    /// Takes the request's body into `sink` (a route with ``Handler/streamingBody()``): the
    /// connection reads it and hands it over as it arrives, then calls
    /// ``RequestBodySink/end(complete:)``; the sink answers through this responder. Call it
    /// once. When the request has no body, the sink's body ends at once, complete; when it
    /// is no longer waited for, incomplete.
    public func receiveBody(into sink: any RequestBodySink) {
        switch target {
        case let .connection(loop, fd, id, sequence):
            let queued = loop.execute { loop in
                guard let connection = loop.connection(fd: fd, id: id) else { return sink.end(complete: false) }
                connection.beginReceiving(sequence: sequence, into: sink)
            }
            if !queued { sink.end(complete: false) }
        case let .inProcess(exchange):
            exchange.perform { exchange.feed(sink) }
        }
    }

    /// Goes on reading the body of the request after its sink paused it (``BodyIntake/paused``).
    public func resumeBody() {
        guard case let .connection(loop, fd, id, sequence) = target else { return }
        loop.execute { loop in loop.connection(fd: fd, id: id)?.resumeReceiving(sequence: sequence) }
    }

    /// Closes the request's connection, answering nothing, if its body is still arriving:
    /// for a request a newer one supersedes (an upload's append, cut off on the client's
    /// side but not yet on ours). Its body ends incomplete. Nothing happens once the body
    /// has ended (its answer is on its way).
    public func cut() {
        guard case let .connection(loop, fd, id, sequence) = target else { return }
        loop.execute { loop in
            guard let connection = loop.connection(fd: fd, id: id), case let .receiving(context, _) = connection.phase, context.sequence == sequence else {
                return
            }
            connection.close()
        }
    }

    /// Sends an interim (1xx) response before the final one, such as `104 Upload Resumption
    /// Supported` with the upload's `Location`; nothing once the final answer is out.
    public func inform(_ status: HTTPStatus, headers: [(name: String, value: String)]) {
        guard case let .connection(loop, fd, id, sequence) = target else { return }
        loop.execute { loop in loop.connection(fd: fd, id: id)?.sendInterim(status, headers: headers, sequence: sequence) }
    }

    private func deliver(_ result: Result<HTTPResponse, SendableError>) {
        switch target {
        case let .connection(loop, fd, id, sequence):
            let job: @Sendable (EventLoop) -> Void = { loop in loop.connection(fd: fd, id: id)?.complete(sequence: sequence, with: result) }
            // Made on the loop itself (a read it sent, a write's answer it was handed): after
            // the events at hand, without the queue other threads share.
            if loop.isCurrentThread { loop.soon(job) } else { loop.execute(job) }
        case let .inProcess(exchange):
            exchange.perform { exchange.complete(result) }
        }
    }
}

/// Carries any error across threads; handlers' errors are values without shared state.
struct SendableError: Error, @unchecked Sendable {
    let error: any Error
    init(_ error: any Error) { self.error = error }
}
