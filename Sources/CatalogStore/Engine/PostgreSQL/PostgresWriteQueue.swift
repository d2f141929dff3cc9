import Foundation

/// The writers of the PostgreSQL engine: a few threads, each with its own connection,
/// taking queued writes in order and running each in a transaction of its own.
/// PostgreSQL orders them (the rows each write checks are locked), and commits that
/// arrive together share a WAL flush.
///
/// Bounded like SQLite's writer: each lane holds a bounded number of jobs, and past it a
/// write fails at once with `unavailable` (503, retry). Heavy jobs (imports, long
/// orders) run one at a time, so they never take every writer. A job whose client has
/// gone before its turn (``WriteContext``) is dropped unrun. A job that meets a
/// serialization failure or a deadlock is rolled back and run again, up to
/// ``maxAttempts`` times, after a short random pause.
final class PostgresWriteQueue: @unchecked Sendable {
    private struct Job {
        /// Runs the write; returns what to call once the transaction has committed.
        let run: (PostgresConnection) throws -> @Sendable () -> Void
        let fail: @Sendable (any Error) -> Void
        let heavy: Bool
        let isAbandoned: (@Sendable () -> Bool)?
    }

    /// Writer threads (and connections) by default.
    static let defaultThreads = 8
    /// How many times a write meeting a serialization failure or deadlock is run.
    static let maxAttempts = 8

    private let condition = NSCondition()
    private var pending: [Job] = []
    private var pendingHeavy: [Job] = []
    private var heavyRunning = false
    private var stopped = false
    private var running: Int
    private let connect: () throws -> PostgresConnection

    init(threads: Int, connect: @escaping () throws -> PostgresConnection) {
        self.connect = connect
        running = threads
        for index in 0..<threads {
            let thread = Thread { [self] in loop() }
            thread.name = "catalog-writer-\(index)"
            thread.start()
        }
    }

    func submit<T: Sendable>(heavy: Bool, _ work: @escaping (any SQLConnection) throws -> T,
                             completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        let job = Job(
            run: { connection in
                let value = try work(connection)
                return { completion(.success(value)) }
            },
            fail: { completion(.failure($0)) },
            heavy: heavy,
            isAbandoned: WriteContext.isAbandoned)
        condition.lock()
        if stopped {
            condition.unlock()
            return job.fail(StoreError.unavailable("The store is shutting down."))
        }
        guard heavy ? pendingHeavy.count < WriteQueue.maxPendingHeavy : pending.count < WriteQueue.maxPending else {
            condition.unlock()
            return job.fail(StoreError.unavailable("Too many writes are waiting; retry shortly."))
        }
        if heavy { pendingHeavy.append(job) } else { pending.append(job) }
        condition.signal()
        condition.unlock()
    }

    /// Finishes the queued writes, then stops the writer threads.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// The next job for a writer: a heavy one when no other runs, else the oldest light one.
    private func next() -> Job? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if !heavyRunning, !pendingHeavy.isEmpty {
                heavyRunning = true
                return pendingHeavy.removeFirst()
            }
            if !pending.isEmpty { return pending.removeFirst() }
            if stopped && pendingHeavy.isEmpty { return nil }
            condition.wait()
        }
    }

    private func loop() {
        var connection: PostgresConnection?
        while let job = next() {
            defer {
                if job.heavy {
                    condition.lock()
                    heavyRunning = false
                    condition.broadcast()
                    condition.unlock()
                }
            }
            if job.isAbandoned?() == true {
                job.fail(StoreError.unavailable("The client has gone."))
                continue
            }
            do {
                let current = try connection ?? connect()
                connection = current
                let completion = try run(job, on: current)
                completion()
            } catch {
                job.fail(error)
            }
            if connection?.isBroken == true { connection = nil }
        }
        condition.lock()
        running -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Runs `job` in a transaction, again after a serialization failure or deadlock.
    private func run(_ job: Job, on connection: PostgresConnection) throws -> @Sendable () -> Void {
        var attempt = 1
        while true {
            try connection.script("BEGIN")
            do {
                let completion = try job.run(connection)
                try connection.script("COMMIT")
                return completion
            } catch let error as SQLError where error.kind == .retry && attempt < Self.maxAttempts {
                try? connection.script("ROLLBACK")
                // A random pause, growing with the attempts, lets the other transaction finish.
                usleep(UInt32.random(in: 500...2_000) * UInt32(attempt))
                attempt += 1
            } catch {
                try? connection.script("ROLLBACK")
                throw error
            }
        }
    }
}
