/// A connection's deadlines, as a pure state machine: the connection says what happened
/// and when (its loop's clock, in milliseconds), and asks what is due at a time. It holds
/// no socket and reads no clock, so its rules are tested with any times, without sleeping
/// (`ConnectionDeadlinesTests`); the socket tests only show that a connection follows it.
///
/// Two deadlines run at once:
/// - the **phase's**: a new connection's first head (the TLS handshake included), a head
///   once its first byte came, a body, a deferred answer, an idle keep-alive connection,
///   and the linger after the last response; what passing it does (``Expiry``) depends
///   on the phase;
/// - the **write's**: an idle bound on a client that does not read its responses, started
///   when a write would block and restarted by every write that makes progress.
struct ConnectionDeadlines: Sendable, Equatable {
    /// The timeouts, in milliseconds.
    struct Timeouts: Sendable, Equatable {
        /// For a whole request head (from its first byte; for a new connection's first
        /// head, from the connection, its TLS handshake included).
        var head: Int64
        /// For a whole body, and for a write without progress.
        var body: Int64
        /// For a deferred answer, unless its route sets its own.
        var request: Int64
        /// For an idle connection between requests.
        var keepAlive: Int64
        /// For the discarded input after the last response.
        var linger: Int64
    }

    /// What passing the phase's deadline does. (Plain values, no reference counted ones:
    /// the state is copied on every event.)
    enum Expiry: Sendable, Equatable {
        /// Closes the connection, answering nothing (nothing was asked).
        case close
        /// Answers 408 for the head or body that did not arrive in time, and closes.
        case fail(Late)
        /// A deferred answer is overdue: answers 503 for it and closes.
        case expire
    }

    /// What arrived too late.
    enum Late: Sendable, Equatable {
        case head, body

        /// The answer to it.
        var error: HTTPError { self == .head ? .headTimeout : .bodyTimeout }
    }

    /// What is due at a time.
    enum Due: Sendable, Equatable {
        /// The client has read nothing for the write's idle bound: close.
        case writeStalled
        /// The phase's deadline passed.
        case expired(Expiry)
    }

    let timeouts: Timeouts
    /// When the phase's deadline passes; `0`: none.
    private(set) var phaseDeadline: Int64 = 0
    /// What passing it does.
    private(set) var expiry = Expiry.close
    /// When a write without progress times out; `0`: none (nothing waits to be written).
    private(set) var writeDeadline: Int64 = 0

    /// A new connection at `now`: its first head must come within the head timeout, or
    /// it is closed without an answer.
    init(_ timeouts: Timeouts, openedAt now: Int64) {
        self.timeouts = timeouts
        set(timeouts.head, .close, at: now)
    }

    private mutating func set(_ timeout: Int64, _ expiry: Expiry, at now: Int64) {
        phaseDeadline = now + timeout
        self.expiry = expiry
    }

    /// A copy with `change` applied. Events return the next state rather than mutate: the
    /// connection (a class) assigns it, a plain store, where a mutating call on its stored
    /// property would cost a dynamic exclusivity check on each request.
    private func with(_ change: (inout ConnectionDeadlines) -> Void) -> ConnectionDeadlines {
        var next = self
        change(&next)
        return next
    }

    // MARK: Events (each returns the next state)

    /// The first byte of a request head came at `now`. The head then has the head timeout
    /// to arrive, answered 408 when it does not; a new TLS connection's first head keeps
    /// the time it had since the connection opened (`continuesFirst`: the handshake counts).
    func headBegan(at now: Int64, continuesFirst: Bool) -> ConnectionDeadlines {
        with { if continuesFirst { $0.expiry = .fail(.head) } else { $0.set($0.timeouts.head, .fail(.head), at: now) } }
    }

    /// A head announced a body at `now`: the whole body has the body timeout.
    func bodyBegan(at now: Int64) -> ConnectionDeadlines {
        with { $0.set($0.timeouts.body, .fail(.body), at: now) }
    }

    /// A deferred handler took the request at `now`: its answer has `timeout` (the
    /// route's own) or the request timeout.
    func awaitingAnswer(at now: Int64, timeout: Int64?) -> ConnectionDeadlines {
        with { $0.set(timeout ?? $0.timeouts.request, .expire, at: now) }
    }

    /// A response was queued at `now`: the next head, already begun (`nextBegan`), has the
    /// head timeout; otherwise the connection may idle for the keep-alive timeout.
    func responded(at now: Int64, nextBegan: Bool) -> ConnectionDeadlines {
        with { nextBegan ? $0.set($0.timeouts.head, .fail(.head), at: now) : $0.set($0.timeouts.keepAlive, .close, at: now) }
    }

    /// The last response is out and input is discarded from `now`, for the linger timeout.
    func lingering(at now: Int64) -> ConnectionDeadlines {
        with { $0.set($0.timeouts.linger, .close, at: now) }
    }

    /// The phase has no deadline of its own any more: a stream (bounded by the write's),
    /// or a final error answer (bounded by the write's, then the linger).
    func clearingPhase() -> ConnectionDeadlines {
        with { $0.phaseDeadline = 0 }
    }

    /// A write would block at `now`: unless one already waits, the write's idle bound starts.
    func writeBlocked(at now: Int64) -> ConnectionDeadlines {
        with { if $0.writeDeadline == 0 { $0.writeDeadline = now + $0.timeouts.body } }
    }

    /// A write made progress, or nothing is left to write: the write's bound stops.
    func wrote() -> ConnectionDeadlines {
        with { $0.writeDeadline = 0 }
    }

    // MARK: Time

    /// What is due at `now`, each deadline once: a stalled write first (it closes), then the
    /// phase's deadline, which it clears.
    mutating func due(at now: Int64) -> Due? {
        if writeDeadline > 0, now >= writeDeadline { return .writeStalled }
        guard phaseDeadline > 0, now >= phaseDeadline else { return nil }
        phaseDeadline = 0
        return .expired(expiry)
    }
}
