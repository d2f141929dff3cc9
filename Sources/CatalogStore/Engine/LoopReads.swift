/// An event loop as the store sees it: where a read waits for a database on the network
/// without blocking a thread (PostgreSQL's connections are watched by the loop and read
/// when they have the answer). The server's loops provide it; everything but
/// ``execute(_:)`` and ``isCurrent`` is called on the loop's own thread.
public protocol ReadReactor: Sendable {
    /// Identifies the loop for the life of the server.
    var id: ObjectIdentifier { get }
    /// Whether the calling thread is the loop's own.
    var isCurrent: Bool { get }
    /// Runs `job` on the loop's thread; false when the loop has stopped (it is dropped).
    func execute(_ job: @escaping @Sendable () -> Void) -> Bool
    /// Runs `job` on the loop's thread once the events it is handling now are handled (also
    /// when they stop it), without a lock or a wake: what they asked for, sent at once.
    func afterEvents(_ job: @escaping @Sendable () -> Void)
    /// Reports `fd`'s readiness to `watcher` (readable always, writable while asked for)
    /// until ``unwatch(_:)`` or the loop stops.
    func watch(_ fd: Int32, writable: Bool, _ watcher: any ReactorWatcher) throws
    /// Asks for `fd`'s writability to be reported, or stops asking.
    func want(writable: Bool, _ fd: Int32)
    /// Stops watching `fd` (before it is closed).
    func unwatch(_ fd: Int32)
}

/// What a ``ReadReactor`` reports a descriptor's readiness to, on the loop's thread.
public protocol ReactorWatcher: AnyObject {
    /// The descriptor is readable, writable, or `failed` (an error or a hang-up).
    func ready(readable: Bool, writable: Bool, failed: Bool)
    /// The loop's sweep (every 5 to 250 ms while it has client connections): time to check
    /// deadlines.
    func tick()
    /// The loop has stopped: nothing is reported again.
    func loopStopped()
}

/// How a read sent from an event loop ended: its result, or a request to run it
/// elsewhere (on a thread that may wait) because the loop could not finish it (its
/// connection was lost, it was put back in the line once already, or the store closed).
public enum LoopReadOutcome<T> {
    case done(Result<T, StoreError>)
    case elsewhere
}

/// What became of reads sent from event loops, since start (PostgreSQL; zero elsewhere).
public struct LoopReadCounts: Sendable, Equatable {
    /// Reads a loop took into its line.
    public var taken = 0
    /// Batches the loops sent, each with one `Sync` (in one write, when the socket takes it).
    public var batches = 0
    /// Reads sent in those batches (one sent again counts again).
    public var sent = 0
    /// Reads put back in the line: PostgreSQL skipped them (a statement before them in their
    /// batch failed), a statement they shared with other GETs by id failed, or a migration made
    /// their prepared statement stale.
    public var resent = 0
    /// Reads answered by a statement they shared with other reads of a batch (GETs by id:
    /// one statement for all the ids; one list page asked at once: one statement,
    /// ``LoopReadSharing``).
    public var shared = 0
    /// Reads a loop could not take (no connection yet, or its line full): run on a pool.
    public var declined = 0
    /// Taken reads handed back to run on a pool: a connection lost or silent too long, a
    /// statement that could not be prepared, a read put back once already, a heavy read
    /// no connection could take when the loop got to it, or the store closing.
    public var handedBack = 0
    /// Connections loops have opened.
    public var connections = 0
    /// List pages the loops read that PostgreSQL found unchanged since they were kept
    /// (the database still at the snapshot they were read in): answered as kept, no row read.
    public var unchangedPages = 0
    /// Of the reads taken, declined and handed back, the heavy ones (searches, geographic
    /// lists), sent on connections of their own (`catalog-loop-searches`).
    public var heavy = HeavyCounts()

    /// What became of the heavy reads sent from event loops.
    public struct HeavyCounts: Sendable, Equatable {
        public var taken = 0
        /// Not taken: no connection yet, the line full, every connection held by a slow
        /// batch, or the caller holding its share of the lane (read on the expensive reads' pool).
        public var declined = 0
        /// Taken, then read on the expensive reads' pool (every connection held by a slow
        /// batch by the time the loop got to it, or as any read is handed back).
        public var handedBack = 0
    }
}
