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
    /// The budget of unsent bytes this stream shares with others, if any.
    private let budget: StreamBudget?

    private struct State {
        /// What was sent before the connection took the stream.
        var pending: [[UInt8]] = []
        var target: Target?
        var closed = false
        var finished = false
        var onDrain: (@Sendable () -> Void)?
        /// Bytes sent and not yet written to the socket (nor dropped).
        var unsent = 0
        /// Whether the stream was cut off: what it holds is dropped, never written.
        var dropped = false
        /// Since when (monotonic milliseconds) some of it waits unsent; `nil` while none does.
        var behindSince: Int64?
    }

    struct Target: Sendable {
        let loop: EventLoop
        let fd: Int32
        let id: UInt64
    }

    private let state = Mutex(State())
    private let drainWanted = Atomic<Bool>(false)

    /// A stream that cuts its client off past `limit` unsent bytes, or when `budget`
    /// (shared with other streams) is spent and it is among those furthest behind.
    public init(limit: Int = 1 << 20, budget: StreamBudget? = nil) {
        self.limit = limit
        self.budget = budget
        budget?.register(self)
    }

    deinit {
        budget?.unregister(self)
        releaseUnsent()
    }

    /// Drops the bytes still unsent, giving them back to the budget at once: they will
    /// never be written (what the connection still holds of them goes with it).
    private func releaseUnsent() {
        let dropped = state.withLock { state in
            state.dropped = true
            defer { state.unsent = 0 }
            return state.unsent
        }
        budget?.release(dropped)
    }

    /// Whether the stream has ended: finished, overflowed, or its connection closed.
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Whether a connection has taken the stream (its response head is out).
    public var isAttached: Bool { state.withLock { $0.target != nil } }

    /// Bytes sent but not yet written to the socket.
    public var unsentBytes: Int { state.withLock { $0.unsent } }

    /// Sets what runs (on an event loop thread; it must be quick) when the unsent bytes
    /// fall to a quarter of ``limit`` after ``wantDrain()``.
    public func onDrain(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.onDrain = handler }
    }

    /// Asks for the ``onDrain(_:)`` handler to run once the unsent bytes are low again.
    public func wantDrain() {
        drainWanted.store(true, ordering: .relaxed)
        if unsentBytes <= limit / 4, drainWanted.exchange(false, ordering: .relaxed) {
            state.withLock { $0.onDrain }?()
        }
    }

    /// Sends `bytes` as the next chunk (nothing for an empty array).
    /// - Returns: false when the stream has ended, or ends now because the client does
    ///   not read fast enough (the connection is then closed).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return !isClosed }
        enum Outcome {
            case closed, overflowing, queued
            case send(Target)
        }
        let outcome: Outcome = state.withLock { state in
            // Counted while the stream is open only, so what a closed one drops is given back once.
            guard !state.closed else { return .closed }
            guard state.unsent <= limit else { return .overflowing }
            if state.unsent == 0, budget != nil { state.behindSince = StreamBudget.milliseconds() }
            state.unsent += bytes.count
            guard let target = state.target else {
                state.pending.append(bytes)
                return .queued
            }
            return .send(target)
        }
        switch outcome {
        case .closed:
            return false
        case .overflowing:
            cancel()
            return false
        case .queued, .send:
            budget?.add(bytes.count)
        }
        guard case let .send(target) = outcome else { return !isClosed }
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
    /// it, ends it there: the response is then never streamed). What it held unsent is
    /// given back to its budget now.
    public func cancel() {
        let (closing, target): (Bool, Target?) = state.withLock { state in
            guard !state.closed else { return (false, nil) }
            state.closed = true
            return (true, state.target)
        }
        guard closing else { return }
        releaseUnsent()
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
        let left: Int? = state.withLock { state in
            guard !state.dropped else { return nil }
            state.unsent -= count
            if state.unsent <= 0 { state.behindSince = nil }
            return state.unsent
        }
        guard let left else { return }
        budget?.release(count)
        if left <= limit / 4, drainWanted.load(ordering: .relaxed), drainWanted.exchange(false, ordering: .relaxed) {
            state.withLock { $0.onDrain }?()
        }
    }

    /// What an open stream holds unsent, and since when; `nil` once it has ended.
    func backlog() -> (unsent: Int, since: Int64?)? {
        state.withLock { $0.closed ? nil : ($0.unsent, $0.behindSince) }
    }

    /// The connection closed: what it had not written never will be.
    func connectionClosed() {
        state.withLock { state in
            state.closed = true
            state.pending = []
        }
        releaseUnsent()
    }
}
