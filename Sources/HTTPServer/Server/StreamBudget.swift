#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

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

    /// Counts `bytes` more, sent to a stream; past the limit, cuts the streams furthest
    /// behind until the others fit.
    func add(_ bytes: Int) {
        guard total.add(bytes, ordering: .relaxed).newValue > limit else { return }
        // The entries are copied under the lock and their streams taken outside it: a stream
        // let go here may end (its deinit unregisters it, which takes the lock).
        let entries = streams.withLock { Array($0.values) }
        let now = Self.milliseconds()
        let lag = minimumLag.milliseconds
        var open: [(stream: ResponseStream, unsent: Int, behindSince: Int64)] = []
        for entry in entries {
            guard let stream = entry.stream, let (unsent, since) = stream.backlog() else { continue }
            open.append((stream, unsent, since ?? now))
        }
        var left = open.reduce(0) { $0 + $1.unsent }
        for candidate in open.sorted(by: { $0.behindSince < $1.behindSince }) where left > limit {
            guard now - candidate.behindSince >= lag else { break }
            candidate.stream.cancel()
            cutCount.add(1, ordering: .relaxed)
            left -= candidate.unsent
        }
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
