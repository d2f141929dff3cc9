import CPostgres
import Foundation
import Synchronization

/// Reads of one statement sent from an event loop (``ReadReactor``) over non-blocking
/// libpq connections of that loop's own: no thread waits for PostgreSQL, and no request
/// hops to a pool and back. Touched on its loop's thread only.
///
/// A read waits in the loop's line (at most ``maxWaiting`` long) until the loop has handled
/// the events at hand; then a connection without a batch in flight takes up to ``maxBatch``
/// of the line and sends them in libpq's pipeline mode with one `Sync` (``Connection``),
/// the lane's ``Lane/promptBatches`` at a time while PostgreSQL answers promptly, more when it is slow
/// (``mayStartBatch(_:)``). At most ``limit`` connections: another is made when reads wait
/// that may leave and no connection is free to take them. A read that finds the line full,
/// or no connection made yet, is not taken (its caller runs it on a pool, as before).
/// Connections are made on a thread of their own (connecting blocks) and handed to the
/// loop; a failed attempt waits a second before the next. A connection that is lost, or
/// silent for ``hung`` (looked at each sweep of the loop), hands its reads back to be run
/// elsewhere (reads can be repeated). The reads by key of one kind in a batch (GETs by id),
/// and the reads of one statement and arguments (a list page), are one statement each
/// (``LoopReadSharing``). A read PostgreSQL skipped, because a statement
/// before it in its batch failed, or ran on a prepared statement a migration made stale, or
/// whose shared statement failed (a failure none of its reads' alone), goes back to the
/// head of the line once (then in a statement of its own), and elsewhere the second time.
///
/// A loop has two readers, one a ``Lane``: quick reads (by key, list pages) and heavy ones
/// (searches, geographic lists), which never share a batch, so a search that takes
/// milliseconds never holds up the GETs sent after it.
final class PostgresLoopReader: @unchecked Sendable {
    /// Connections a loop opens at most, whatever the loops: each is a session on the
    /// database server.
    static let connectionsPerLoop = 8
    /// Connections all the loops of a server open at most, but for 2 per loop beyond
    /// eight loops (``connections(loops:)``).
    static let connectionsPerServer = 16
    /// How long a connection with a batch in flight may go without a byte from PostgreSQL
    /// before it is given up as hung (a dropped network path that no reset reports).
    /// PostgreSQL sends what it has at each flush request (``readsPerFlush``): between two,
    /// at most four reads and their statements' preparations run, each within the
    /// statement timeout (1 s); well within 10 s.
    static let hung: Duration = .seconds(10)
    /// Statements of a batch between two flush requests. Each flush is a write PostgreSQL makes
    /// and a wake-up of the loop; after every read, PostgreSQL spent about 35 µs of CPU a GET
    /// by id, after every fourth about 25 µs and the loop no more (Benchmarks/README.md,
    /// eleventh part), while a read waits for at most three others before its rows leave.
    static let readsPerFlush = 4
    /// How long a batch in flight may take before it counts as slow.
    static let slowBatch: Duration = .milliseconds(2)
    /// Reads a connection sends in one batch at most. PostgreSQL runs them one after
    /// another (a GET by id takes tens of microseconds), so a read waits for those before it.
    static let maxBatch = 16
    /// Reads that wait in a loop's line at most (besides those put back in it): as many as
    /// eight connections take at once for quick reads; for heavy ones, twice what its
    /// connections take at once (16 with two).
    var maxWaiting: Int { lane == .quick ? Self.connectionsPerLoop * Self.maxBatch : 2 * limit * Self.heavyBatch }
    /// Heavy reads one caller (``Job/caller``) holds at most in a loop's lane, waiting or
    /// sent: what its connections take at once (8 with two), half of its line, as many
    /// as a caller's places on the expensive reads' pool. Its others go elsewhere, to take turns.
    var heavyPerCaller: Int { limit * Self.heavyBatch }
    /// How long after a failed attempt the next connection is tried.
    private static let retryAfter: Duration = .seconds(1)

    let reactor: any ReadReactor
    let lane: Lane
    private let connect: @Sendable () throws -> PostgresConnection
    private let counts: Counts
    /// Connections this loop opens at most.
    private let limit: Int
    /// The threads connecting for any loop of the database, which its close waits for.
    private let connectingThreads: DispatchGroup
    /// Told when the reader closes (its loop stopped, or the store closed).
    private let closing: @Sendable (PostgresLoopReader) -> Void
    /// Every open connection, and those of them without a batch.
    private var open: [Connection] = []
    private var idle: [Connection] = []
    private var connecting = false
    private var nextAttempt: ContinuousClock.Instant?
    private var waiting: [Job] = []
    private var waitingHead = 0
    /// The places each caller holds in a heavy lane (``heavyPerCaller``).
    private var places: [String: Int] = [:]
    /// Whether the line is to be served once the events at hand are handled.
    private var serving = false
    private var closed = false

    init(
        reactor: any ReadReactor, lane: Lane, limit: Int, counts: Counts, connectingThreads: DispatchGroup,
        closing: @escaping @Sendable (PostgresLoopReader) -> Void, connect: @escaping @Sendable () throws -> PostgresConnection
    ) {
        self.reactor = reactor
        self.lane = lane
        self.limit = limit
        self.counts = counts
        self.connectingThreads = connectingThreads
        self.closing = closing
        self.connect = connect
    }

    /// Takes `job` into the line, sent once the events at hand are handled (on the loop's
    /// thread). False, without taking it, when the loop cannot take it now: its
    /// `completion` then never runs.
    func read(_ job: Job) -> Bool {
        guard !closed else { return false }
        if open.isEmpty, !connecting { startConnecting() }
        if waiting.count - waitingHead >= maxWaiting { dropAbandoned() }
        guard !open.isEmpty, waiting.count - waitingHead < maxWaiting, lane == .quick || mayTakeHeavy(job) else {
            counts.declined.add(1, ordering: .relaxed)
            if lane == .heavy { counts.heavyDeclined.add(1, ordering: .relaxed) }
            return false
        }
        counts.taken.add(1, ordering: .relaxed)
        if lane == .heavy {
            counts.heavyTaken.add(1, ordering: .relaxed)
            if let caller = job.caller {
                places[caller, default: 0] += 1
                job.holdsPlace = true
            }
        }
        waiting.append(job)
        serveSoon()
        return true
    }

    /// Whether the heavy lane takes `job`: its caller holds fewer than ``heavyPerCaller``
    /// places, and some connection is free or prompt (else another is made if it may be).
    private func mayTakeHeavy(_ job: Job) -> Bool {
        if let caller = job.caller, places[caller, default: 0] >= heavyPerCaller {
            // Its reads whose clients have gone give their places back first.
            dropAbandoned()
            if places[caller, default: 0] >= heavyPerCaller { return false }
        }
        guard isHeld(at: ContinuousClock.now) else { return true }
        if !connecting, open.count < limit { startConnecting() }
        return false
    }

    /// Whether every connection holds a batch that PostgreSQL has been silent on for
    /// longer than ``slowBatch`` (a heavy batch's statements are answered one by one).
    private func isHeld(at now: ContinuousClock.Instant) -> Bool {
        idle.isEmpty && open.allSatisfy { $0.isSilent(since: now - Self.slowBatch) }
    }

    /// `job` leaves the line (answered, handed back or dropped): its caller's place is free.
    private func release(_ job: Job) {
        guard job.holdsPlace, let caller = job.caller else { return }
        job.holdsPlace = false
        let held = places[caller, default: 1] - 1
        places[caller] = held > 0 ? held : nil
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

    /// A read of a batch is done, or time passed (the loop's sweep): reads held back while
    /// batches were prompt may leave now.
    func progressed() {
        if waiting.count > waitingHead { serveSoon() }
    }

    /// Removes the waiting reads whose clients no longer wait (a full line).
    private func dropAbandoned() {
        waiting.removeFirst(waitingHead)
        waitingHead = 0
        waiting.removeAll { job in
            guard job.isAbandoned() else { return false }
            release(job)
            return true
        }
    }

    /// Hands `job` back to run elsewhere.
    private func handBack(_ job: Job) {
        release(job)
        counts.handedBack.add(1, ordering: .relaxed)
        if lane == .heavy { counts.heavyHandedBack.add(1, ordering: .relaxed) }
        job.completion(nil)
    }

    /// `count` reads were answered by one statement they shared.
    func shared(_ count: Int) {
        counts.shared.add(count, ordering: .relaxed)
    }

    /// A read of a batch is done: its outcome (`nil`: run it elsewhere).
    func finished(_ job: Job, _ outcome: Result<PostgresRows, any Error>?) {
        guard let outcome else { return handBack(job) }
        release(job)
        job.completion(outcome)
    }

    /// `connection`'s batch is done, with `skipped`, the reads PostgreSQL did not run (a
    /// statement before them failed), ran on a statement it no longer kept, or whose shared
    /// statement failed: they go back to the head of the line, once. The connection takes
    /// the next batch.
    func batchEnded(_ connection: Connection, skipped: [Job]) {
        if connection.isBroken { drop(connection) } else { idle.append(connection) }
        for job in skipped.reversed() {
            guard !job.resent, !closed else {
                handBack(job)
                continue
            }
            job.resent = true
            counts.resent.add(1, ordering: .relaxed)
            if waitingHead > 0 {
                waitingHead -= 1
                waiting[waitingHead] = job
            } else {
                waiting.insert(job, at: 0)
            }
        }
        serveSoon()
    }

    /// `connection` was lost: `jobs`, its batch's reads not yet done, run elsewhere.
    func lost(_ connection: Connection, _ jobs: [Job]) {
        drop(connection)
        for job in jobs { handBack(job) }
        serveSoon()
    }

    /// Sends the line's reads in batches on idle connections, up to the lane's
    /// ``Lane/maxBatch`` each, while ``mayStartBatch(_:)``; makes another connection when
    /// reads are left waiting that may go, and hands the line back when no connection is
    /// left, or, for heavy reads, while every connection holds a slow batch. Run again when a read
    /// arrives, a batch or one of its reads ends, a connection is made or lost, and at the
    /// loop's sweeps.
    private func serveLine() {
        guard !closed else { return }
        let now = ContinuousClock.now
        while !idle.isEmpty, waiting.count > waitingHead, mayStartBatch(now) {
            var batch: [Job] = []
            while batch.count < lane.maxBatch, let job = nextWaiting() { batch.append(job) }
            guard !batch.isEmpty else { break }
            counts.batches.add(1, ordering: .relaxed)
            counts.sent.add(batch.count, ordering: .relaxed)
            idle.removeLast().start(batch)
        }
        guard waiting.count > waitingHead else { return }
        if !open.isEmpty, !connecting, idle.isEmpty, open.count < limit, mayStartBatch(now) { startConnecting() }
        // With no connection (one may be on its way: connecting can take long), the line
        // goes to the pool; so do heavy reads while every connection of theirs holds a slow batch.
        if open.isEmpty || (lane == .heavy && isHeld(at: now)) {
            while let job = nextWaiting() { handBack(job) }
        }
    }

    /// Whether another batch may leave now: while fewer than the lane's
    /// ``Lane/promptBatches`` are in flight, while the line holds a whole batch, or once
    /// every batch in flight has been out longer than ``slowBatch``.
    ///
    /// Reads of one statement are quick; while PostgreSQL answers them promptly, one
    /// session a loop, taking all the line holds, keeps up with the loop, and fewer,
    /// fuller batches cost both sides less CPU a read (a batch of `GET`s by id is one
    /// statement): one batch in flight rather than two took `GET`s from 8.6–9.7 to 13.3–13.8
    /// reads a batch and our CPU a `GET` from 22.8–23.0 to 20.5–20.9 µs (Benchmarks/README.md,
    /// fifteenth part). More sessions busy at once only add runnable processes: on a
    /// machine PostgreSQL shares, batches on up to eight sessions at once took the 99th
    /// percentile of list pages from about 5 ms to 25–300 ms (tenth part). A line that
    /// holds a whole batch (more reads than one batch a round trip takes: a database
    /// across a network) sends it on another session at once.
    /// When answers are slow (a database reading from disk, or waiting for locks), more
    /// sessions run reads side by side, up to the loop's ``limit``.
    private func mayStartBatch(_ now: ContinuousClock.Instant) -> Bool {
        let inFlight = open.count - idle.count
        guard inFlight >= lane.promptBatches, waiting.count - waitingHead < lane.maxBatch else { return true }
        return !open.contains { $0.hasBatch(sentSince: now - Self.slowBatch) }
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
            release(job)
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
            // Dropped (and closed) here when the loop has stopped, and the reader let go
            // with it (one that had made no connection was never told it stopped).
            if !reactor.execute({ [self] in adopt(made.result) }) { closing(self) }
        }
    }

    /// A connection made on another thread, handed to the loop.
    private struct Made: @unchecked Sendable {
        let result: Result<PostgresConnection, any Error>
    }

    private func adopt(_ result: Result<PostgresConnection, any Error>) {
        connecting = false
        guard !closed else { return }
        if case let .success(made) = result, PQsetnonblocking(made.connection, 1) == 0, PQenterPipelineMode(made.connection) == 1 {
            guard let connection = try? Connection(made, reader: self) else {
                // The loop watches nothing more: it is stopping, and lets a reader with
                // no connection go (one with connections is closed with them).
                if open.isEmpty { return close() }
                nextAttempt = ContinuousClock.now + Self.retryAfter
                return serveLine()
            }
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
