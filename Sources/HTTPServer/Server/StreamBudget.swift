import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One budget of unsent bytes shared by many ``ResponseStream``s (every event stream of a
/// server): when their bytes waiting for slow clients pass ``limit``, the streams furthest
/// behind (whose oldest unsent byte has waited longest, at least ``minimumLag``) are cut
/// first, their bytes given back at once, until the rest fit again. A stream whose client
/// reads is never behind for long, so a change sent to many streams at once cuts none of
/// them. Each stream's own ``ResponseStream/limit`` still applies; this bounds what idle
/// streams hold together, however many there are. A client that was cut reconnects and
/// resumes where it stopped (an `EventSource` sends `Last-Event-ID`).
public final class StreamBudget: Sendable {
    /// The most unsent bytes all the streams hold together.
    public let limit: Int
    /// How long a stream's oldest unsent byte must have waited before it may be cut.
    public let minimumLag: Duration

    /// A stream the budget may cut, held weakly.
    private final class Entry: @unchecked Sendable {
        weak var stream: ResponseStream?
        init(_ stream: ResponseStream) { self.stream = stream }
    }

    private let total = Atomic<Int>(0)
    private let streams = Mutex<[ObjectIdentifier: Entry]>([:])
    private let cutCount = Atomic<Int>(0)

    /// A budget of `limit` unsent bytes, cutting streams behind by `minimumLag` or more.
    public init(limit: Int = 64 << 20, minimumLag: Duration = .seconds(1)) {
        self.limit = limit
        self.minimumLag = minimumLag
    }

    /// Bytes the streams hold unsent now.
    public var unsentBytes: Int { total.load(ordering: .relaxed) }

    /// Streams cut to keep within the budget since it was made.
    public var cutStreams: Int { cutCount.load(ordering: .relaxed) }

    func register(_ stream: ResponseStream) {
        let entry = Entry(stream)
        streams.withLock { $0[ObjectIdentifier(stream)] = entry }
    }

    func unregister(_ stream: ResponseStream) {
        _ = streams.withLock { $0.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    /// Whether `bytes` more fit (or nothing waits at all: one change larger than the whole
    /// budget still goes to a stream that has caught up). A sender that is told no holds
    /// its bytes back, so the budget bounds memory, and asks ``makeRoom(for:)``.
    public func admits(_ bytes: Int) -> Bool {
        let held = total.load(ordering: .relaxed)
        return held == 0 || held + bytes <= limit
    }

    /// Cuts the streams at least ``minimumLag`` behind, oldest first, until `bytes` more
    /// would fit. Returns whether they now do.
    @discardableResult
    public func makeRoom(for bytes: Int) -> Bool {
        // The entries are copied under the lock and their streams taken outside it: a stream
        // let go here may end (its deinit unregisters it, which takes the lock).
        let entries = streams.withLock { Array($0.values) }
        let now = Self.milliseconds()
        let lag = minimumLag.milliseconds
        var behind: [(stream: ResponseStream, unsent: Int, since: Int64)] = []
        for entry in entries {
            guard let stream = entry.stream, let (unsent, since) = stream.backlog(), let since, now - since >= lag else { continue }
            behind.append((stream, unsent, since))
        }
        for candidate in behind.sorted(by: { $0.since < $1.since }) where !admits(bytes) {
            candidate.stream.cancel()  // gives its bytes back at once
            cutCount.add(1, ordering: .relaxed)
        }
        return admits(bytes)
    }

    /// Counts `bytes` more, sent to a stream; past the limit, cuts the streams furthest
    /// behind until the others fit.
    func add(_ bytes: Int) {
        guard total.add(bytes, ordering: .relaxed).newValue > limit else { return }
        makeRoom(for: 0)
    }

    /// Gives back `bytes` (written to a socket, or dropped with their stream).
    func release(_ bytes: Int) {
        if bytes > 0 { total.subtract(bytes, ordering: .relaxed) }
    }

    /// Monotonic milliseconds.
    static func milliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
