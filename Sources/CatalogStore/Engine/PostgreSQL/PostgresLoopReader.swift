import CPostgres
import Foundation
import Synchronization

/// Reads of one statement sent from an event loop (``ReadReactor``) over non-blocking
/// libpq connections of that loop's own: no thread waits for PostgreSQL, and no request
/// hops to a pool and back. Touched on its loop's thread only.
///
/// A read waits in the loop's line (at most ``maxWaiting`` long) until the loop has handled
/// the events at hand; then each connection without a batch takes up to ``maxBatch`` of the
/// line at once and sends them in one write, in libpq's pipeline mode, with one `Sync`
/// (``Connection``). At most ``connectionsPerLoop`` connections, each with one batch in
/// flight: a line that finds them all busy waits for the first to finish, and another
/// connection is made. A read that finds the line full, or no connection made yet, is not
/// taken (its caller runs it on a pool, as before). Connections are made on a thread of
/// their own (connecting blocks) and handed to the loop; a failed attempt waits a second
/// before the next. A connection that is lost hands its reads back to be run elsewhere
/// (reads can be repeated), and so does a batch cut short by an error in a read before them.
final class PostgresLoopReader: @unchecked Sendable {
    /// A read: its statement, and what receives its rows (`nil`: run it elsewhere).
    struct Job {
        let sql: String
        let arguments: SQLArguments
        /// Whether nobody waits for the answer any more (a waiting read is then dropped).
        let isAbandoned: () -> Bool
        let completion: (Result<PostgresRows, any Error>?) -> Void
    }

    /// Connections a loop opens at most, whatever the loops: each is a session on the
    /// database server.
    static let connectionsPerLoop = 8
    /// Connections all the loops of a server open at most, but for 2 per loop beyond
    /// eight loops (``connections(loops:)``).
    static let connectionsPerServer = 16
    /// How long a batch may be in flight before its connection is given up as hung (a
    /// dropped network path that no reset reports): the statement timeout, with margin.
    static let hung: Duration = .seconds(5)
    /// Reads a connection sends in one batch at most: PostgreSQL runs them one after
    /// another, so the last waits for the others (a GET by id takes tens of microseconds).
    static let maxBatch = 16

    /// The connections each of `loops` loops opens at most: 8, fewer with more than two
    /// loops (16 for all of them), and never fewer than 2.
    static func connections(loops: Int) -> Int {
        max(2, min(connectionsPerLoop, connectionsPerServer / max(1, loops)))
    }
    /// Reads that wait for a connection at most, per loop.
    static let maxWaiting = 64
    /// How long after a failed attempt the next connection is tried.
    private static let retryAfter: Duration = .seconds(1)

    let reactor: any ReadReactor
    private let connect: @Sendable () throws -> PostgresConnection
    private let counts: Counts
    /// Connections this loop opens at most.
    private let limit: Int
    /// The threads connecting for any loop of the database, which its close waits for.
    private let connectingThreads: DispatchGroup
    /// Told when the reader closes (its loop stopped, or the store closed).
    private let closing: @Sendable (PostgresLoopReader) -> Void
    /// Every open connection, and those of them without a read.
    private var open: [Connection] = []
    private var idle: [Connection] = []
    private var connecting = false
    private var nextAttempt: ContinuousClock.Instant?
    private var waiting: [Job] = []
    private var waitingHead = 0
    /// Whether the line is to be served once the events at hand are handled.
    private var serving = false
    private var closed = false

    init(
        reactor: any ReadReactor, limit: Int, counts: Counts, connectingThreads: DispatchGroup,
        closing: @escaping @Sendable (PostgresLoopReader) -> Void, connect: @escaping @Sendable () throws -> PostgresConnection
    ) {
        self.reactor = reactor
        self.limit = limit
        self.counts = counts
        self.connectingThreads = connectingThreads
        self.closing = closing
        self.connect = connect
    }

    /// Counts of every loop's reads of one database (``LoopReadCounts``).
    final class Counts: Sendable {
        let taken = Atomic<Int>(0)
        let batches = Atomic<Int>(0)
        let declined = Atomic<Int>(0)
        let handedBack = Atomic<Int>(0)
        let connections = Atomic<Int>(0)

        var snapshot: LoopReadCounts {
            LoopReadCounts(
                taken: taken.load(ordering: .relaxed), batches: batches.load(ordering: .relaxed), declined: declined.load(ordering: .relaxed),
                handedBack: handedBack.load(ordering: .relaxed), connections: connections.load(ordering: .relaxed))
        }
    }

    /// Takes `job` into the line, sent once the events at hand are handled (on the loop's
    /// thread). False, without taking it, when the loop cannot take it now: its
    /// `completion` then never runs.
    func read(_ job: Job) -> Bool {
        guard !closed else { return false }
        if open.isEmpty, !connecting { startConnecting() }
        if waiting.count - waitingHead >= Self.maxWaiting { dropAbandoned() }
        guard !open.isEmpty, waiting.count - waitingHead < Self.maxWaiting else {
            counts.declined.add(1, ordering: .relaxed)
            return false
        }
        counts.taken.add(1, ordering: .relaxed)
        waiting.append(job)
        serveSoon()
        return true
    }

    /// Serves the line once the events at hand are handled: the reads they brought leave
    /// together.
    private func serveSoon() {
        guard !serving else { return }
        serving = true
        reactor.afterEvents { [self] in
            serving = false
            serveLine()
        }
    }

    /// Gives up connections whose batch has been in flight past ``hung`` (their reads are
    /// handed back): asked whenever reads wait with every connection busy.
    private func giveUpHung() {
        let now = ContinuousClock.now
        for connection in open where connection.isHung(at: now) { connection.lose() }
    }

    /// Removes the waiting reads whose clients no longer wait (a full line).
    private func dropAbandoned() {
        waiting.removeFirst(waitingHead)
        waitingHead = 0
        waiting.removeAll { $0.isAbandoned() }
    }

    /// Hands `job` back to run elsewhere.
    private func handBack(_ job: Job) {
        counts.handedBack.add(1, ordering: .relaxed)
        job.completion(nil)
    }

    /// A read of `connection`'s batch is done: its outcome (`nil`: run it elsewhere).
    func finished(_ job: Job, _ outcome: Result<PostgresRows, any Error>?) {
        if let outcome { job.completion(outcome) } else { handBack(job) }
    }

    /// `connection`'s batch is done: it takes the next from the line.
    func batchEnded(_ connection: Connection) {
        if connection.isBroken { drop(connection) } else { idle.append(connection) }
        serveSoon()
    }

    /// `connection` was lost: `jobs`, its batch's reads not yet done, run elsewhere.
    func lost(_ connection: Connection, _ jobs: [Job]) {
        drop(connection)
        for job in jobs { handBack(job) }
        serveSoon()
    }

    /// Sends the line's reads in batches on idle connections; asks for another connection
    /// when some are left waiting, and hands them all back when no connection is left or
    /// coming to serve them.
    private func serveLine() {
        guard !closed else { return }
        while let connection = idle.last, waiting.count > waitingHead {
            var batch: [Job] = []
            while batch.count < Self.maxBatch, let job = nextWaiting() { batch.append(job) }
            guard !batch.isEmpty else { break }
            idle.removeLast()
            counts.batches.add(1, ordering: .relaxed)
            connection.start(batch)
        }
        guard waiting.count > waitingHead else { return }
        giveUpHung()
        // With no connection (one may be on its way: connecting can take long), the line
        // goes to the pool.
        if open.isEmpty {
            while let job = nextWaiting() { handBack(job) }
        } else if !connecting, open.count < limit {
            startConnecting()
        }
    }

    /// The oldest waiting read whose client still waits (the others are dropped: they were answered at their deadline).
    private func nextWaiting() -> Job? {
        while waitingHead < waiting.count {
            let job = waiting[waitingHead]
            waitingHead += 1
            // Taken reads leave the array once they are its larger part: a line that never
            // empties (a loop always this busy) holds no more than it has waiting.
            if waitingHead == waiting.count {
                waiting.removeAll(keepingCapacity: true)
                waitingHead = 0
            } else if waitingHead * 2 > waiting.count {
                waiting.removeFirst(waitingHead)
                waitingHead = 0
            }
            if !job.isAbandoned() { return job }
        }
        return nil
    }

    private func drop(_ connection: Connection) {
        connection.unwatch()
        open.removeAll { $0 === connection }
        idle.removeAll { $0 === connection }
    }

    /// Makes a connection on a thread of its own, handed to the loop once made.
    private func startConnecting() {
        if let nextAttempt, ContinuousClock.now < nextAttempt { return }
        connecting = true
        let connect = connect
        connectingThreads.enter()
        Thread.detachNewThread { [self] in
            defer { connectingThreads.leave() }
            let made = Made(result: Result { try connect() })
            // Dropped (and closed) here when the loop has stopped.
            _ = reactor.execute { [self] in adopt(made.result) }
        }
    }

    /// A connection made on another thread, handed to the loop.
    private struct Made: @unchecked Sendable {
        let result: Result<PostgresConnection, any Error>
    }

    private func adopt(_ result: Result<PostgresConnection, any Error>) {
        connecting = false
        guard !closed else { return }
        if case let .success(made) = result, PQsetnonblocking(made.connection, 1) == 0, PQenterPipelineMode(made.connection) == 1,
            let connection = try? Connection(made, reader: self)
        {
            open.append(connection)
            idle.append(connection)
            nextAttempt = nil
            counts.connections.add(1, ordering: .relaxed)
        } else {
            nextAttempt = ContinuousClock.now + Self.retryAfter
        }
        serveLine()
    }

    /// Closes every connection (on the loop's thread, or once it has stopped): reads in
    /// flight and waiting are handed back to run elsewhere.
    func close() {
        guard !closed else { return }
        closed = true
        let connections = open
        open.removeAll()
        idle.removeAll()
        for connection in connections { for job in connection.close() { handBack(job) } }
        while let job = nextWaiting() { handBack(job) }
        closing(self)
    }
}
