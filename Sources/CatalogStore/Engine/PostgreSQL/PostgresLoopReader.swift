import CPostgres
import Foundation
import Synchronization

/// Reads of one statement sent from an event loop (``ReadReactor``) over non-blocking
/// libpq connections of that loop's own: no thread waits for PostgreSQL, and no request
/// hops to a pool and back. Touched on its loop's thread only.
///
/// At most ``connectionsPerLoop`` connections, each with one statement in flight (prepared
/// once per connection). A read that finds them all busy waits in the loop's line, at most
/// ``maxWaiting`` long; one that finds the line full, or no connection made yet, is not
/// taken (its caller runs it on a pool, as before). Connections are made on a thread of
/// their own (connecting blocks) and handed to the loop; a failed attempt waits a second
/// before the next. A connection that is lost hands its read back to be run elsewhere
/// (reads can be repeated).
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
    /// How long a statement may be in flight before its connection is given up as hung (a
    /// dropped network path that no reset reports): the statement timeout, with margin.
    static let hung: Duration = .seconds(5)

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
    private var open: [LoopConnection] = []
    private var idle: [LoopConnection] = []
    private var connecting = false
    private var nextAttempt: ContinuousClock.Instant?
    private var waiting: [Job] = []
    private var waitingHead = 0
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
        let declined = Atomic<Int>(0)
        let handedBack = Atomic<Int>(0)
        let connections = Atomic<Int>(0)

        var snapshot: LoopReadCounts {
            LoopReadCounts(
                taken: taken.load(ordering: .relaxed), declined: declined.load(ordering: .relaxed),
                handedBack: handedBack.load(ordering: .relaxed), connections: connections.load(ordering: .relaxed))
        }
    }

    /// Sends `job` (on the loop's thread). False, without taking it, when the loop cannot
    /// take it now: its `completion` then never runs.
    func read(_ job: Job) -> Bool {
        guard !closed else { return false }
        if let connection = idle.popLast() {
            counts.taken.add(1, ordering: .relaxed)
            connection.start(job)
            return true
        }
        giveUpHung()
        if !connecting, open.count < limit { startConnecting() }
        if waiting.count - waitingHead >= Self.maxWaiting { dropAbandoned() }
        guard open.count > idle.count, waiting.count - waitingHead < Self.maxWaiting else {
            counts.declined.add(1, ordering: .relaxed)
            return false
        }
        counts.taken.add(1, ordering: .relaxed)
        waiting.append(job)
        return true
    }

    /// Gives up connections whose statement has been in flight past ``hung`` (their
    /// reads are handed back): asked whenever every connection is busy.
    private func giveUpHung() {
        let now = ContinuousClock.now
        for connection in open where connection.isHung(at: now) { connection.giveUp() }
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

    /// `connection` has finished `job` (`outcome` `nil`: run it elsewhere); the next
    /// waiting read goes to it.
    fileprivate func finished(_ connection: LoopConnection, _ job: Job, _ outcome: Result<PostgresRows, any Error>?) {
        if connection.isBroken { drop(connection) } else { idle.append(connection) }
        if let outcome { job.completion(outcome) } else { handBack(job) }
        serveLine()
    }

    /// `connection` was lost while idle.
    fileprivate func lost(_ connection: LoopConnection) {
        drop(connection)
        serveLine()
    }

    /// Starts waiting reads on idle connections; hands them all back when no connection
    /// is left or coming to serve them.
    private func serveLine() {
        while !idle.isEmpty, let job = nextWaiting() { idle.removeLast().start(job) }
        // With no connection (one may be on its way: connecting can take long), the line
        // goes to the pool.
        if open.isEmpty {
            while let job = nextWaiting() { handBack(job) }
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

    private func drop(_ connection: LoopConnection) {
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
        if case let .success(made) = result, PQsetnonblocking(made.connection, 1) == 0,
            let connection = try? LoopConnection(made, reader: self)
        {
            open.append(connection)
            idle.append(connection)
            nextAttempt = nil
            counts.connections.add(1, ordering: .relaxed)
        } else {
            nextAttempt = ContinuousClock.now + Self.retryAfter
        }
        serveLine()
        if waiting.count > waitingHead, open.count < limit { startConnecting() }
    }

    /// Closes every connection (on the loop's thread, or once it has stopped): reads in
    /// flight and waiting are handed back to run elsewhere.
    func close() {
        guard !closed else { return }
        closed = true
        let connections = open
        open.removeAll()
        idle.removeAll()
        for connection in connections { if let job = connection.close() { handBack(job) } }
        while let job = nextWaiting() { handBack(job) }
        closing(self)
    }
}

/// One non-blocking connection of a ``PostgresLoopReader``, watched by its loop: one
/// statement at a time, prepared before its first run (one round trip more, once).
private final class LoopConnection: ReactorWatcher {
    private enum Phase {
        case idle
        /// Preparing the job's statement under this name ("": the unnamed statement,
        /// once ``maxPrepared`` are kept).
        case preparing(String)
        case executing
    }

    private let connection: PostgresConnection
    private let fd: Int32
    /// Held strongly: the reader lets its connections go when it closes, or when it drops one.
    private let reader: PostgresLoopReader
    private var job: PostgresLoopReader.Job?
    private var phase = Phase.idle
    /// The statement's result, or its error, until libpq says it is done.
    private var result: OpaquePointer?
    private var failure: (any Error)?
    private var prepared: [StatementKey: String] = [:]
    private var wantsWritable = false
    private var watching = false
    /// When the job's statement was sent.
    private var sent = ContinuousClock.now

    /// Statements kept prepared on a connection at most (a loop reads a few kinds).
    private static let maxPrepared = 64

    var isBroken: Bool { connection.isBroken }

    init(_ connection: PostgresConnection, reader: PostgresLoopReader) throws {
        self.connection = connection
        self.reader = reader
        fd = PQsocket(connection.connection)
        guard fd >= 0 else { throw SQLError(kind: .connection, code: "08006", message: "the connection has no socket") }
        Self.bound(fd)
        try reader.reactor.watch(fd, writable: false, self)
        watching = true
    }

    deinit { if let result { PQclear(result) } }

    /// Puts the kernel's deadlines on a TCP socket (a Unix socket refuses them, harmlessly):
    /// what was sent and not acknowledged for 10 s, or an idle path silent through three
    /// probes after 30 s, fails the socket, so a read on a connection whose network path
    /// was dropped without a reset is handed back whatever else the loop does.
    private static func bound(_ fd: Int32) {
        func set(_ level: Int32, _ option: Int32, _ value: Int32) {
            var value = value
            _ = setsockopt(fd, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
        set(Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, 10_000)
        set(SOL_SOCKET, SO_KEEPALIVE, 1)
        set(Int32(IPPROTO_TCP), TCP_KEEPIDLE, 30)
        set(Int32(IPPROTO_TCP), TCP_KEEPINTVL, 10)
        set(Int32(IPPROTO_TCP), TCP_KEEPCNT, 3)
    }

    /// Sends `job`'s statement (preparing it first when new).
    func start(_ job: PostgresLoopReader.Job) {
        self.job = job
        sent = ContinuousClock.now
        if let name = prepared[StatementKey(job.sql)] {
            execute(name)
        } else {
            let name = prepared.count < Self.maxPrepared ? "l\(prepared.count)" : ""
            guard PQsendPrepare(connection.connection, name, PostgresConnection.numbered(job.sql), 0, nil) == 1 else { return lose() }
            phase = .preparing(name)
        }
        flush()
    }

    private func execute(_ name: String) {
        guard let job else { return }
        let sent: Int32
        do {
            sent = try PostgresConnection.withParameters(job.arguments) { count, values, lengths, formats in
                PQsendQueryPrepared(connection.connection, name, count, values, lengths, formats, 1)
            }
        } catch {
            // Refused before sending (a NUL in a text), as the blocking path refuses it.
            return finish(.failure(error))
        }
        guard sent == 1 else { return lose() }
        phase = .executing
    }

    /// Sends what libpq holds, watching for writability while some is left.
    private func flush() {
        guard job != nil else { return }
        switch PQflush(connection.connection) {
        case 0: want(writable: false)
        case 1: want(writable: true)
        default: lose()
        }
    }

    private func want(writable: Bool) {
        guard writable != wantsWritable else { return }
        wantsWritable = writable
        reader.reactor.want(writable: writable, fd)
    }

    func ready(readable: Bool, writable: Bool, failed: Bool) {
        if writable { flush() }
        guard readable || failed else { return }
        guard PQconsumeInput(connection.connection) == 1 else { return lose() }
        take()
        if job == nil, PQstatus(connection.connection) != CONNECTION_OK { lose() }
    }

    func loopStopped() {
        watching = false
        reader.close()
    }

    /// Takes what libpq has read: the statement's results, each step ending with a null.
    private func take() {
        while let job, PQisBusy(connection.connection) == 0 {
            guard let next = PQgetResult(connection.connection) else {
                stepDone()
                continue
            }
            switch phase {
            case .preparing:
                if failure == nil { note(next, expecting: PGRES_COMMAND_OK, job) }
                PQclear(next)
            case .executing:
                if result == nil, failure == nil, PQresultStatus(next) == PGRES_TUPLES_OK {
                    result = next
                } else {
                    if failure == nil { note(next, expecting: PGRES_TUPLES_OK, job) }
                    PQclear(next)
                }
            case .idle:
                // A job is never idle: the connection is in a state it cannot be in.
                PQclear(next)
                return lose()
            }
        }
    }

    /// Whether its statement has been in flight past ``PostgresLoopReader/hung``.
    func isHung(at now: ContinuousClock.Instant) -> Bool {
        job != nil && now - sent > PostgresLoopReader.hung
    }

    /// Gives the connection up (a hung one): its job is handed back.
    func giveUp() { lose() }

    private func note(_ result: OpaquePointer, expecting status: ExecStatusType, _ job: PostgresLoopReader.Job) {
        do { try connection.check(result, expecting: status, sql: job.sql) } catch { failure = error }
    }

    /// A step of the job is done: its statement prepared (run it now), or run.
    private func stepDone() {
        switch phase {
        case let .preparing(name):
            if let failure { return finish(.failure(failure)) }
            if !name.isEmpty, let job { prepared[StatementKey(job.sql)] = name }
            execute(name)
            flush()
        case .executing:
            let outcome: Result<PostgresRows, any Error>
            if let failure {
                outcome = .failure(failure)
            } else if let result {
                outcome = .success(PostgresRows(result))
                self.result = nil
            } else {
                outcome = .failure(SQLError(kind: .other, code: "XX000", message: "no result"))
            }
            finish(outcome)
        case .idle:
            break
        }
    }

    /// Ends the job: its outcome, or (a lost connection) a request to run it elsewhere.
    private func finish(_ outcome: Result<PostgresRows, any Error>) {
        guard let job else { return }
        self.job = nil
        phase = .idle
        failure = nil
        // A result kept before an error came: never the next job's.
        if let result {
            PQclear(result)
            self.result = nil
        }
        want(writable: false)
        if case let .failure(error as SQLError) = outcome, error.kind == .connection { connection.isBroken = true }
        reader.finished(self, job, connection.isBroken ? nil : outcome)
    }

    /// The connection is lost: its job, if any, is run elsewhere.
    private func lose() {
        connection.isBroken = true
        if let result {
            PQclear(result)
            self.result = nil
        }
        if job != nil { finish(.failure(SQLError(kind: .connection, code: "08006", message: "the connection was lost"))) } else { reader.lost(self) }
    }

    func unwatch() {
        guard watching else { return }
        watching = false
        reader.reactor.unwatch(fd)
    }

    /// Stops watching (the connection closes when let go): the job it had, to run elsewhere.
    func close() -> PostgresLoopReader.Job? {
        unwatch()
        connection.isBroken = true
        defer {
            job = nil
            phase = .idle
        }
        return job
    }
}
