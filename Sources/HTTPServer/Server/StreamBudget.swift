import Synchronization

/// One budget of unsent bytes shared by many ``ResponseStream``s (every event stream of a
/// server): when their bytes waiting for slow clients pass ``limit``, the streams furthest
/// behind are cut first (their connections closed) until the rest fit again. Each stream's
/// own ``ResponseStream/limit`` still applies; this bounds what idle streams hold together,
/// however many there are. A client that was cut reconnects and resumes where it stopped
/// (an `EventSource` sends `Last-Event-ID`).
public final class StreamBudget: Sendable {
    /// The most unsent bytes all the streams hold together.
    public let limit: Int

    /// A stream the budget may cut, held weakly.
    private final class Entry: @unchecked Sendable {
        weak var stream: ResponseStream?
        init(_ stream: ResponseStream) { self.stream = stream }
    }

    private let total = Atomic<Int>(0)
    private let streams = Mutex<[ObjectIdentifier: Entry]>([:])
    private let cutCount = Atomic<Int>(0)

    /// A budget of `limit` unsent bytes.
    public init(limit: Int = 64 << 20) {
        self.limit = limit
    }

    /// Bytes the streams hold unsent now.
    public var unsentBytes: Int { total.load(ordering: .relaxed) }

    /// Streams cut to keep within the budget since it was made.
    public var cutStreams: Int { cutCount.load(ordering: .relaxed) }

    func register(_ stream: ResponseStream) {
        streams.withLock { $0[ObjectIdentifier(stream)] = Entry(stream) }
    }

    func unregister(_ stream: ResponseStream) {
        _ = streams.withLock { $0.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    /// Counts `bytes` more, sent to a stream; past the limit, cuts the streams furthest
    /// behind (the one sending too, if it is among them) until the others fit.
    func add(_ bytes: Int) {
        guard total.add(bytes, ordering: .relaxed).newValue > limit else { return }
        let behind = streams.withLock { entries in
            entries.values.compactMap { $0.stream }.filter { !$0.isClosed }
        }.map { ($0, $0.unsentBytes) }.sorted { $0.1 > $1.1 }
        // Streams cut already give their bytes back once their connections close: only the
        // open ones count here, or a cut still under way would cut the innocent too.
        var left = behind.reduce(0) { $0 + $1.1 }
        for (stream, unsent) in behind where left > limit {
            // Its bytes are given back once its connection closes, on its loop.
            stream.cancel()
            cutCount.add(1, ordering: .relaxed)
            left -= unsent
        }
    }

    /// Gives back `bytes` (written to a socket, or dropped with their stream).
    func release(_ bytes: Int) {
        if bytes > 0 { total.subtract(bytes, ordering: .relaxed) }
    }
}
