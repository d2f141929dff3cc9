import Foundation

/// The writers of the PostgreSQL engine: a few threads, each with its own connection,
/// taking queued writes in order. PostgreSQL orders them (the rows each write checks are
/// locked), and commits that arrive together share a WAL flush.
///
/// Group commit, as SQLite's writer: a writer takes the light writes waiting (up to
/// ``maxBatch``) and runs them in one transaction, each write of several statements
/// (`atomic`) in a savepoint of its own, so one failing write never undoes the others,
/// then commits once and answers each. When a statement fails in a way that aborts the
/// transaction (a write of one statement hitting a constraint, a deadlock), the batch is
/// rolled back and each of its writes runs again alone.
///
/// Bounded like SQLite's writer: each lane holds a bounded number of jobs, and past it a
/// write fails at once with `unavailable` (503, retry). Heavy jobs (imports, long
/// orders) run one at a time, so they never take every writer. A job whose client has
/// gone before its turn (``WriteOptions/isAbandoned``) is dropped unrun. A job that meets a
/// serialization failure or a deadlock is rolled back and run again, up to
/// ``maxAttempts`` times, after a short random pause.
final class PostgresWriteQueue: @unchecked Sendable {
    private typealias Job = WriteJob<PostgresConnection>

    /// Writer threads (and connections) by default. Two, each committing what waits in
    /// one transaction, took more durable writes per second than one or eight in
    /// `Benchmarks/postgres.sh` (more writers make smaller groups); every replica adds two.
    static let defaultThreads = 2
    /// How many times a write meeting a serialization failure or deadlock is run.
    static let maxAttempts = 8
    /// The most light writes one transaction holds.
    static let maxBatch = 64

    private var condition: NSCondition { lanes.condition }
    private let lanes = WriteLanes<PostgresConnection>()
    private var heavyRunning = false
    private var running: Int
    private let connect: () throws -> PostgresConnection
    private let commits: CommitSignal

    init(threads: Int, commits: CommitSignal, connect: @escaping () throws -> PostgresConnection) {
        self.connect = connect
        self.commits = commits
        running = threads
        for index in 0..<threads {
            let thread = Thread { [self] in loop() }
            thread.name = "catalog-writer-\(index)"
            thread.start()
        }
    }

    func submit<T: Sendable>(_ options: WriteOptions, atomic: Bool, heavy: Bool, _ work: @escaping (any SQLConnection) throws -> T,
                             completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        lanes.submit(Job(options, atomic: atomic, heavy: heavy, work, completion: completion))
    }

    /// Finishes the queued writes, then stops the writer threads.
    func stop() {
        condition.lock()
        lanes.stopped = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// The next work for a writer: a heavy job when no other runs, else the oldest light
    /// ones (up to ``maxBatch``); empty once stopped with nothing left.
    private func next() -> [Job] {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if !heavyRunning, !lanes.heavy.isEmpty {
                heavyRunning = true
                return [lanes.heavy.removeFirst()]
            }
            if !lanes.light.isEmpty { return lanes.takeLight(Self.maxBatch) }
            if lanes.stopped && lanes.heavy.isEmpty { return [] }
            condition.wait()
        }
    }

    private func loop() {
        var connection: PostgresConnection?
        while case let batch = next(), !batch.isEmpty {
            // Work whose client has gone is dropped before it takes a writer's time.
            let live = batch.filter { job in
                guard job.isAbandoned?() == true else { return true }
                job.fail(StoreError.unavailable("The client has gone."))
                return false
            }
            do {
                let current = try connection ?? connect()
                connection = current
                if live.count > 1 {
                    try runTogether(live, on: current)
                } else if let job = live.first {
                    do { try run(job, on: current)() } catch { job.fail(error) }
                }
            } catch {
                for job in live { job.fail(error) }
            }
            if connection?.isBroken == true { connection = nil }
            if batch.first?.heavy == true {
                condition.lock()
                heavyRunning = false
                condition.broadcast()
                condition.unlock()
            }
        }
        condition.lock()
        running -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Runs `batch` in one transaction and answers each job after the commit; when the
    /// transaction cannot go on (a statement that failed outside a savepoint, a deadlock,
    /// a failed commit), rolls it back and runs each job alone.
    private func runTogether(_ batch: [Job], on connection: PostgresConnection) throws {
        var outcomes: [Result<@Sendable () -> Void, any Error>] = []
        outcomes.reserveCapacity(batch.count)
        do {
            try connection.script("BEGIN")
            try connection.lockChangeLog()
            for job in batch {
                if job.atomic { try connection.script("SAVEPOINT job") }
                do {
                    outcomes.append(.success(try job.run(connection)))
                    if job.atomic { try connection.script("RELEASE SAVEPOINT job") }
                } catch let error as SQLError where !job.atomic || error.kind == .retry || error.kind == .connection {
                    throw error
                } catch {
                    // The job's own failure: what it wrote is undone, the others' stays.
                    if job.atomic { try connection.script("ROLLBACK TO SAVEPOINT job; RELEASE SAVEPOINT job") }
                    outcomes.append(.failure(error))
                }
            }
            try connection.script("COMMIT")
        } catch let error as SQLError {
            try? connection.script("ROLLBACK")
            if error.kind == .connection { throw error }
            for job in batch {
                do { try run(job, on: connection)() } catch { job.fail(error) }
            }
            return
        }
        for (job, outcome) in zip(batch, outcomes) {
            switch outcome {
            case let .success(completion): completion()
            case let .failure(error): job.fail(error)
            }
        }
        commits.fire()
    }

    /// Runs `job` in a transaction, again after a serialization failure or deadlock.
    private func run(_ job: Job, on connection: PostgresConnection) throws -> @Sendable () -> Void {
        var attempt = 1
        while true {
            do {
                let completion = try connection.inTransaction {
                    try connection.lockChangeLog()
                    return try job.run(connection)
                }
                commits.fire()
                return completion
            } catch let error as SQLError where error.kind == .retry && attempt < Self.maxAttempts {
                // A random pause, growing with the attempts, lets the other transaction finish.
                usleep(UInt32.random(in: 500...2_000) * UInt32(attempt))
                attempt += 1
            }
        }
    }
}
