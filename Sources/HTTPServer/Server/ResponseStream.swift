import Synchronization

/// A response body sent while it is produced, such as server-sent events: a handler
/// answers with an ``HTTPResponse`` whose ``HTTPResponse/stream`` is set, and sends
/// chunks through the stream from any thread for as long as the connection lasts.
///
/// The connection writes the head with `Transfer-Encoding: chunked` (HTTP/1.0: the
/// body ends when the connection closes), each ``send(_:)`` as one chunk, and the last
/// chunk on ``finish()`` or when the server shuts down; then it closes. While it streams,
/// it reads nothing more from the client and no keep-alive or head timeout applies, but
/// a client that reads nothing for the body timeout is disconnected, and so is one that
/// is sent more while over ``limit`` unsent bytes: a stream never buffers without bound.
public final class ResponseStream: Sendable {
    /// The most bytes sent but not yet written to the socket before a send cuts the client
    /// off (a send below it is taken whole, however large).
    public let limit: Int

    private struct State {
        /// What was sent before the connection took the stream.
        var pending: [[UInt8]] = []
        var target: Target?
        var closed = false
        var finished = false
        var onDrain: (@Sendable () -> Void)?
    }

    struct Target: Sendable {
        let loop: EventLoop
        let fd: Int32
        let id: UInt64
    }

    private let state = Mutex(State())
    private let unsent = Atomic<Int>(0)
    private let drainWanted = Atomic<Bool>(false)

    /// A stream that cuts its client off past `limit` unsent bytes.
    public init(limit: Int = 1 << 20) {
        self.limit = limit
    }

    /// Whether the stream has ended: finished, overflowed, or its connection closed.
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Whether a connection has taken the stream (its response head is out).
    public var isAttached: Bool { state.withLock { $0.target != nil } }

    /// Bytes sent but not yet written to the socket.
    public var unsentBytes: Int { unsent.load(ordering: .relaxed) }

    /// Sets what runs (on an event loop thread; it must be quick) when the unsent bytes
    /// fall to a quarter of ``limit`` after ``wantDrain()``.
    public func onDrain(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.onDrain = handler }
    }

    /// Asks for the ``onDrain(_:)`` handler to run once the unsent bytes are low again.
    public func wantDrain() {
        drainWanted.store(true, ordering: .relaxed)
        if unsent.load(ordering: .relaxed) <= limit / 4, drainWanted.exchange(false, ordering: .relaxed) {
            state.withLock { $0.onDrain }?()
        }
    }

    /// Sends `bytes` as the next chunk (nothing for an empty array).
    /// - Returns: false when the stream has ended, or ends now because the client does
    ///   not read fast enough (the connection is then closed).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return !isClosed }
        if unsent.add(bytes.count, ordering: .relaxed).oldValue > limit {
            cancel()
            return false
        }
        let target: Target? = state.withLock { state in
            guard !state.closed else { return nil }
            guard let target = state.target else {
                state.pending.append(bytes)
                return nil
            }
            return target
        }
        guard let target else { return !isClosed }
        return target.loop.execute { loop in loop.connection(fd: target.fd, id: target.id)?.streamSend(bytes) }
    }

    /// Ends the stream cleanly: the connection sends what is queued and the last chunk, then closes.
    public func finish() {
        let target: Target? = state.withLock { state in
            guard !state.closed else { return nil }
            state.closed = true
            state.finished = true
            return state.target
        }
        guard let target else { return }
        target.loop.execute { loop in loop.connection(fd: target.fd, id: target.id)?.streamFinish() }
    }

    /// Ends the stream at once and closes its connection (or, before a connection took
    /// it, ends it there: the response is then never streamed).
    public func cancel() {
        let target: Target? = state.withLock { state in
            guard !state.closed else { return nil }
            state.closed = true
            return state.target
        }
        guard let target else { return }
        target.loop.execute { loop in loop.connection(fd: target.fd, id: target.id)?.close() }
    }

    // MARK: The connection's side

    /// Binds the stream to its connection; returns what was sent before, and whether the
    /// stream was finished (or ended) already.
    func attach(_ target: Target) -> (pending: [[UInt8]], ended: Bool, finished: Bool) {
        state.withLock { state in
            state.target = target
            let pending = state.pending
            state.pending = []
            return (pending, state.closed, state.finished)
        }
    }

    /// `count` bytes left for the socket.
    func written(_ count: Int) {
        guard count > 0 else { return }
        let left = unsent.subtract(count, ordering: .relaxed).newValue
        if left <= limit / 4, drainWanted.load(ordering: .relaxed), drainWanted.exchange(false, ordering: .relaxed) {
            state.withLock { $0.onDrain }?()
        }
    }

    /// The connection closed.
    func connectionClosed() {
        state.withLock { state in
            state.closed = true
            state.pending = []
        }
    }
}
