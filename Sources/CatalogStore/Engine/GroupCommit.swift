import Foundation

/// One writer thread's hold on its engine (``SQLiteWriter``, ``PostgresWriter``): what the
/// group-commit loop (``GroupCommit``) runs transactions on, and how the engine's failures
/// are to be read. Made before its thread starts, then used by that thread only.
protocol CommitWriter: AnyObject, Sendable {
    /// What jobs run on.
    associatedtype Connection
    /// Runs `body` in one write transaction: committed when it returns, rolled back when
    /// it throws.
    func transaction<T>(_ body: (Connection) throws -> T) throws -> T
    /// Opens a savepoint inside the transaction (around an `atomic` job of a batch).
    func savepoint(_ connection: Connection) throws
    /// Keeps what the job wrote since ``savepoint(_:)``.
    func release(_ connection: Connection) throws
    /// Undoes what the job wrote since ``savepoint(_:)``, and releases it.
    func rollBack(_ connection: Connection) throws
    /// Whether `error`, thrown by a job of a batch (`atomic`: run in a savepoint), leaves
    /// the transaction unable to go on, so the batch stops there (PostgreSQL aborts a
    /// transaction on any failed statement outside a savepoint; SQLite undoes the one
    /// statement).
    func abortsBatch(_ error: any Error, atomic: Bool) -> Bool
    /// Whether a batch whose transaction failed with `error` runs again, each job alone in
    /// a transaction of its own; otherwise each of its jobs fails.
    func rerunsAlone(after error: any Error) -> Bool
    /// Whether a job that failed alone with `error` (a serialization failure, a deadlock)
    /// succeeds when run again.
    func isRetryable(_ error: any Error) -> Bool
    /// Runs at the end of each transaction, after its jobs; when it throws, the transaction
    /// fails as a whole. Returns whether it left work for ``settle()``.
    func finish(_ connection: Connection) throws -> Bool
    /// Does, in a transaction of its own, the work ``finish(_:)`` left. A failure leaves it
    /// to the next transaction that leaves work (what failed would likely fail again).
    func settle()
    /// Runs after each commit, once every answer has been handed on (maintenance).
    func didCommit()
    /// Runs once the writer has no more work, before the loop says it stopped: closes
    /// what the writer holds, so nothing of the engine runs on its thread after ``GroupCommit/stop()``.
    func finished()
}

/// The queued writes of an engine, and the writer threads that commit them in groups: one
/// loop for every engine, the engine's part behind ``CommitWriter``.
///
/// A writer takes the light writes waiting (up to `maxBatch`) and runs them in one
/// transaction, each write of several statements (`atomic`) in a savepoint of its own, so
/// one failing write never undoes the others, then commits once (one `fsync`, or one WAL
/// flush) and answers each, after the commit. When a write leaves the transaction unable
/// to go on (``CommitWriter/abortsBatch(_:atomic:)``) or the commit fails, nothing of the
/// batch is kept: each write runs again alone, or fails, as the engine says
/// (``CommitWriter/rerunsAlone(after:)``). A write alone needs no savepoint; one that meets
/// a serialization failure or a deadlock runs again, up to ``maxAttempts`` times, after a
/// short random pause.
///
/// Fair and bounded: heavy writes (an import, a whole playlist order) run one at a time,
/// each in a transaction of its own, taking turns with batches of light ones, so a client
/// that sends large writes delays others by at most one of them. Background writes (the
/// server's own bookkeeping) run one at a time too, when no other write waits or the
/// writer is not saturated by requests' writes (``busyWindow``), and otherwise within
/// ``backgroundShare`` of the writer's time. Each lane holds a bounded
/// number of writes; past it a write fails at once with `unavailable` (503, retry). A write
/// whose client has gone before its turn (``WriteOptions/isAbandoned``) is dropped unrun.
/// Completions run where the submitter's ``WriteOptions`` say (a request's event loop),
/// else on the writer's thread, and must be quick.
final class GroupCommit<Writer: CommitWriter>: @unchecked Sendable {
    typealias Job = WriteJob<Writer.Connection>

    /// The most light writes waiting at once.
    static var maxLight: Int { 10_000 }
    /// The most heavy writes waiting at once.
    static var maxHeavy: Int { 64 }
    /// The most background writes waiting at once.
    static var maxBackground: Int { 1_000 }
    /// The share of a writer's time background writes may take while requests' writes
    /// wait: a background write runs then only once that share of the time since has
    /// accrued for it (at most ``maxBackgroundCredit``), and its duration is spent from it.
    static var backgroundShare: Double { 0.01 }
    static var maxBackgroundCredit: Double { 0.02 }
    /// The writer counts as saturated once requests' writes took ``saturation`` of its
    /// time (decayed over this window), and until they take less than ``relief``: requests
    /// then get all but ``backgroundShare`` of it. Otherwise its spare time (between
    /// requests' writes) is the background writes'. (Measured: wrk's 32 connections of
    /// durable creates keep a writer 87–91% busy with them; 1,000 creates a second, 20–30%.)
    static var busyWindow: Double { 0.2 }
    static var saturation: Double { 0.6 }
    static var relief: Double { 0.4 }
    /// Requests' writes waiting on average (over the same window) that make the writer
    /// count as saturated too, and under which it no longer does: a closed loop of clients
    /// that background writes slow down no longer keeps the writer busy, but piles up.
    static var queueSaturation: Double { 8 }
    static var queueRelief: Double { 4 }
    /// How many times a write alone meeting a serialization failure or deadlock is run.
    static var maxAttempts: Int { 8 }

    /// Guards everything below.
    private let condition = NSCondition()
    private var light: [Job] = []
    private var heavy: [Job] = []
    private var background: [Job] = []
    /// Seconds of writer time background writes may take while others wait, and when it
    /// was last accrued.
    private var backgroundCredit = 0.0
    private var creditAccrued = Date()
    /// The writers' seconds on requests' writes and on background writes, decayed over
    /// ``busyWindow``, and when they were last decayed.
    private var foregroundLoad = 0.0
    private var backgroundLoad = 0.0
    /// Requests' writes waiting, integrated over time and decayed likewise.
    private var queueLoad = 0.0
    private var loadDecayed = Date()
    private var saturated = false
    /// Set once the store closes: nothing more is queued.
    private var stopped = false
    /// Whether a heavy write runs now (one at a time).
    private var heavyRunning = false
    /// Whether a heavy write goes next (after a light batch).
    private var heavyTurn = false
    /// Writer threads still running.
    private var running: Int

    private let maxBatch: Int
    /// How long a writer whose last transaction left work waits for another write before
    /// it settles that work.
    private let settleDelay: Double
    private let commits: CommitSignal

    /// Starts a writer thread for each of `writers`, named `name` (and its number, when
    /// there are several).
    init(_ writers: [Writer], name: String, maxBatch: Int, settleDelay: Double = 0.02, commits: CommitSignal) {
        self.maxBatch = maxBatch
        self.settleDelay = settleDelay
        self.commits = commits
        running = writers.count
        for (index, writer) in writers.enumerated() {
            let thread = Thread { [self] in loop(writer) }
            thread.name = writers.count == 1 ? name : "\(name)-\(index)"
            thread.start()
        }
    }

    /// Queues `work`; `completion` receives its result after the commit (or the failure).
    /// - Parameters:
    ///   - options: what the submitter knows of its request (``WriteOptions``).
    ///   - atomic: pass `true` when `work` runs more than one modifying statement.
    ///   - heavy: pass `true` when `work` may take milliseconds (thousands of rows).
    func submit<T: Sendable>(
        _ options: WriteOptions = WriteOptions(), atomic: Bool = false, heavy isHeavy: Bool = false,
        _ work: @escaping (Writer.Connection) throws -> T, completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let job = Job(options, atomic: atomic, heavy: isHeavy, work, completion: completion)
        condition.lock()
        let refusal: StoreError? =
            if stopped {
                .unavailable("The store is shutting down.")
            } else if job.background ? background.count >= Self.maxBackground : isHeavy ? heavy.count >= Self.maxHeavy : light.count >= Self.maxLight {
                .unavailable("Too many writes are waiting; retry shortly.")
            } else {
                nil
            }
        if refusal == nil {
            if job.background { background.append(job) } else if isHeavy { heavy.append(job) } else { light.append(job) }
            condition.signal()
        }
        condition.unlock()
        if let refusal { job.fail(refusal) }
    }

    /// Finishes the queued writes, then stops the writer threads.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// What a writer does next.
    private enum Turn {
        case batch([Job])
        /// A background write; `whileBusy`: others waited meanwhile (its time is spent from the credit).
        case background(Job, whileBusy: Bool)
        /// Nothing came for the settle delay: settle what the last transaction left.
        case settle
        case stop
    }

    /// The next turn of a writer whose last transaction left work (`unsettled`) or not.
    private func next(unsettled: Bool) -> Turn {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let now = Date()
            backgroundCredit = min(Self.maxBackgroundCredit, backgroundCredit + now.timeIntervalSince(creditAccrued) * Self.backgroundShare)
            creditAccrued = now
            let elapsed = now.timeIntervalSince(loadDecayed)
            let decay = exp(-elapsed / Self.busyWindow)
            foregroundLoad *= decay
            backgroundLoad *= decay
            queueLoad = queueLoad * decay + Double(light.count) * elapsed
            loadDecayed = now
            // Saturated: background writes only on their credit. Else: whenever no request's write waits.
            saturated =
                foregroundLoad >= (saturated ? Self.relief : Self.saturation) * Self.busyWindow
                || queueLoad >= (saturated ? Self.queueRelief : Self.queueSaturation) * Self.busyWindow
            let waiting = !light.isEmpty || (!heavy.isEmpty && !heavyRunning)
            if !background.isEmpty, saturated ? backgroundCredit > 0 : !waiting {
                return .background(background.removeFirst(), whileBusy: saturated)
            }
            if !heavyRunning, !heavy.isEmpty, light.isEmpty || heavyTurn {
                heavyRunning = true
                heavyTurn = false
                return .batch([heavy.removeFirst()])
            }
            if !light.isEmpty {
                let taken = Array(light.prefix(maxBatch))
                light.removeFirst(taken.count)
                heavyTurn = true
                return .batch(taken)
            }
            if stopped, heavy.isEmpty, background.isEmpty { return unsettled ? .settle : .stop }
            if unsettled {
                if !condition.wait(until: Date(timeIntervalSinceNow: settleDelay)), light.isEmpty, heavy.isEmpty { return .settle }
            } else if !background.isEmpty {
                // Background writes wait for credit, or for the load to pass.
                _ = condition.wait(until: Date(timeIntervalSinceNow: 0.01))
            } else {
                condition.wait()
            }
        }
    }

    private func loop(_ writer: Writer) {
        var unsettled = false
        while true {
            let batch: [Job]
            switch next(unsettled: unsettled) {
            case .stop:
                writer.finished()
                condition.lock()
                running -= 1
                condition.broadcast()
                condition.unlock()
                return
            case .settle:
                unsettled = false
                writer.settle()
                continue
            case let .batch(taken):
                batch = taken
            case let .background(job, whileBusy):
                let started = Date()
                if job.isAbandoned?() == true { job.fail(StoreError.unavailable("The client has gone.")) } else { runAlone(job, on: writer, unsettled: &unsettled) }
                let spent = Date().timeIntervalSince(started)
                condition.lock()
                backgroundLoad += spent
                if whileBusy { backgroundCredit -= spent }
                condition.unlock()
                continue
            }
            let started = Date()
            defer {
                let spent = Date().timeIntervalSince(started)
                condition.lock()
                foregroundLoad += spent
                condition.unlock()
            }
            // Work whose client has gone is dropped before it takes the writer's time.
            let live = batch.filter { job in
                guard job.isAbandoned?() == true else { return true }
                job.fail(StoreError.unavailable("The client has gone."))
                return false
            }
            if live.count > 1 {
                runTogether(live, on: writer, unsettled: &unsettled)
            } else if let job = live.first {
                runAlone(job, on: writer, unsettled: &unsettled)
            }
            if batch.first?.heavy == true {
                condition.lock()
                heavyRunning = false
                condition.broadcast()
                condition.unlock()
            }
        }
    }

    /// Runs `batch` in one transaction and answers each job after the commit. Every job
    /// gets exactly one answer: its completion after the commit, or a failure.
    private func runTogether(_ batch: [Job], on writer: Writer, unsettled: inout Bool) {
        var outcomes: [Result<@Sendable () -> Void, any Error>] = []
        outcomes.reserveCapacity(batch.count)
        do {
            unsettled = try writer.transaction { connection in
                for job in batch {
                    if job.atomic { try writer.savepoint(connection) }
                    do {
                        let completion = try job.run(connection)
                        // Recorded once released: a failed release is the job's one outcome.
                        if job.atomic { try writer.release(connection) }
                        outcomes.append(.success(completion))
                    } catch  where writer.abortsBatch(error, atomic: job.atomic) {
                        throw error
                    } catch {
                        // The job's own failure: what it wrote is undone, the others' stays.
                        if job.atomic { try writer.rollBack(connection) }
                        outcomes.append(.failure(error))
                    }
                }
                return try writer.finish(connection)
            }
        } catch {
            // Nothing in the transaction is durable.
            if writer.rerunsAlone(after: error) {
                for job in batch { runAlone(job, on: writer, unsettled: &unsettled) }
            } else {
                for (index, job) in batch.enumerated() {
                    if index < outcomes.count, case let .failure(failure) = outcomes[index] { job.fail(failure) } else { job.fail(error) }
                }
            }
            return
        }
        for (job, outcome) in zip(batch, outcomes) {
            switch outcome {
            case let .success(completion): completion()
            case let .failure(error): job.fail(error)
            }
        }
        committed(writer)
    }

    /// Runs `job` in a transaction of its own, again after a serialization failure or a
    /// deadlock, and answers it.
    private func runAlone(_ job: Job, on writer: Writer, unsettled: inout Bool) {
        var attempt = 1
        while true {
            do {
                let (completion, left) = try writer.transaction { connection in
                    (try job.run(connection), try writer.finish(connection))
                }
                unsettled = left
                completion()
                committed(writer)
                return
            } catch  where writer.isRetryable(error) && attempt < Self.maxAttempts {
                // A random pause, growing with the attempts, lets the other transaction finish.
                usleep(UInt32.random(in: 500...2_000) * UInt32(attempt))
                attempt += 1
            } catch {
                job.fail(error)
                return
            }
        }
    }

    private func committed(_ writer: Writer) {
        commits.fire()
        writer.didCommit()
    }
}
