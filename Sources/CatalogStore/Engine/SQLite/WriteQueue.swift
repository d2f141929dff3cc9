import Foundation
import GRDB

/// The single writer, with group commit.
///
/// Writes queue up while a transaction is being committed; the writer thread then runs
/// every queued write in one transaction and commits once. One failing write never
/// undoes the others: a single SQL statement is atomic by itself (SQLite rolls back a
/// failed statement, triggers included), and writes made of several statements are
/// submitted as `atomic`, which runs them in a savepoint of their own. (Savepoints are
/// not the default: they cost about a third of the write throughput.) Only the batch's
/// last step, `finish` (the search index writes queued, once enough have), fails the
/// batch as a whole when it throws: the index itself is then broken; so does a failed
/// statement that rolled the whole transaction back (a full disk, an I/O error). Work
/// `finish` leaves waits for the writer's idle time: `settle` runs it, in a transaction
/// of its own, once no job has come for ``settleDelay`` (and before the writer stops).
/// Jobs should do only database work. Their completions run after the commit, where the
/// submitter's ``WriteOptions`` ask (a request's event loop), else on the writer thread,
/// and must be quick. With `synchronous=FULL` that is one `fsync` for the whole batch, and
/// each completion is called only after its data is durable.
///
/// Fair and bounded: a heavy job (a whole playlist order, an import) runs in a
/// transaction of its own, taking turns with batches of light ones, so a client that
/// sends large jobs delays others by at most one of them. Each lane holds a bounded
/// number of jobs; past it a write fails at once with `unavailable` (503, retry). A job
/// whose client has gone before its turn (``WriteOptions/isAbandoned``) is dropped unrun.
final class WriteQueue: @unchecked Sendable {
    private typealias Job = WriteJob<Database>

    private let writer: DatabasePool
    private var condition: NSCondition { lanes.condition }
    private let lanes = WriteLanes<Database>()
    /// Whether a heavy job goes next (after a light batch).
    private var heavyTurn = false
    private let maxBatch = 512
    private let finished = NSCondition()
    private var running = true

    /// Asked after each batch whether ``maintain`` should run on the writer connection
    /// (WAL maintenance between batches).
    private let needsMaintenance: () -> Bool
    private let maintain: (Database) -> Void
    /// Runs at the end of each batch, inside its transaction, after its jobs (the search
    /// index writes they queued, when enough have); when it throws, the batch fails as a
    /// whole. Returns whether it left work for ``settle``.
    private let finish: (Database) throws -> Bool
    /// Does, in a transaction of its own, the work `finish` left, once the writer has had
    /// no job for ``settleDelay``.
    private let settle: (Database) throws -> Void
    /// How long the writer waits for another job before it settles.
    static let settleDelay = 0.02
    /// Whether the last batch's `finish` left work (read and written by the writer thread only).
    private var unsettled = false
    private let commits: CommitSignal

    init(writer: DatabasePool, commits: CommitSignal, finish: @escaping (Database) throws -> Bool = { _ in false },
         settle: @escaping (Database) throws -> Void = { _ in },
         needsMaintenance: @escaping () -> Bool = { false }, maintain: @escaping (Database) -> Void = { _ in }) {
        self.writer = writer
        self.commits = commits
        self.finish = finish
        self.settle = settle
        self.needsMaintenance = needsMaintenance
        self.maintain = maintain
        let thread = Thread { [self] in loop() }
        thread.name = "catalog-writer"
        thread.start()
    }

    /// Queues `work`; `completion` receives its result after the commit (or the failure).
    /// - Parameters:
    ///   - options: what the submitter knows of its request (``WriteOptions``).
    ///   - atomic: pass `true` when `work` runs more than one modifying statement.
    ///   - heavy: pass `true` when `work` may take milliseconds (thousands of rows).
    func submit<T: Sendable>(_ options: WriteOptions = WriteOptions(), atomic: Bool = false, heavy: Bool = false, _ work: @escaping (Database) throws -> T,
                             completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        lanes.submit(Job(options, atomic: atomic, heavy: heavy, work, completion: completion))
    }

    /// Finishes the queued writes, then stops the writer thread.
    func stop() {
        condition.lock()
        lanes.stopped = true
        condition.signal()
        condition.unlock()
        finished.lock()
        while running { finished.wait() }
        finished.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while lanes.isEmpty && !lanes.stopped {
                guard unsettled else {
                    condition.wait()
                    continue
                }
                if !condition.wait(until: Date(timeIntervalSinceNow: Self.settleDelay)), lanes.isEmpty, !lanes.stopped {
                    condition.unlock()
                    settleLeftWork()
                    condition.lock()
                }
            }
            if lanes.isEmpty && lanes.stopped {
                condition.unlock()
                break
            }
            let batch: [Job]
            if !lanes.heavy.isEmpty && (lanes.light.isEmpty || heavyTurn) {
                batch = [lanes.heavy.removeFirst()]
                heavyTurn = false
            } else {
                batch = lanes.takeLight(maxBatch)
                heavyTurn = true
            }
            condition.unlock()
            // Work whose client has gone is dropped before it takes the writer's time.
            let live = batch.filter { job in
                guard job.isAbandoned?() == true else { return true }
                job.fail(StoreError.unavailable("The client has gone."))
                return false
            }
            if !live.isEmpty { commit(live) }
        }
        if unsettled { settleLeftWork() }
        finished.lock()
        running = false
        finished.broadcast()
        finished.unlock()
    }

    private func commit(_ batch: [Job]) {
        // Every job gets exactly one answer: its completion after the commit, or a failure.
        var completions: [(@Sendable () -> Void)?] = Array(repeating: nil, count: batch.count)
        var failures: [(any Error)?] = Array(repeating: nil, count: batch.count)
        do {
            try writer.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    let savepoint = try db.cachedStatement(sql: "SAVEPOINT job")
                    let release = try db.cachedStatement(sql: "RELEASE job")
                    let rollback = try db.cachedStatement(sql: "ROLLBACK TO job")
                    for (index, job) in batch.enumerated() {
                        if job.atomic { try savepoint.execute() }
                        do {
                            completions[index] = try job.run(db)
                        } catch {
                            failures[index] = error
                            if job.atomic { try rollback.execute() }
                        }
                        if job.atomic { try release.execute() }
                    }
                    unsettled = try finish(db)
                    return .commit
                }
            }
        } catch {
            // The transaction failed as a whole (busy, full, I/O): nothing in it is durable.
            for (index, job) in batch.enumerated() { job.fail(failures[index] ?? error) }
            return
        }
        for (index, job) in batch.enumerated() {
            if let completion = completions[index] {
                completion()
            } else {
                job.fail(failures[index] ?? StoreError.unavailable("The write did not run."))
            }
        }
        commits.fire()
        // Maintenance only after every answer has been handed on.
        if needsMaintenance() { writer.writeWithoutTransaction { db in maintain(db) } }
    }

    /// Runs `settle` in a transaction. A failure leaves the work to the next batch that
    /// leaves work (not retried meanwhile: what failed would likely fail again).
    private func settleLeftWork() {
        unsettled = false
        try? writer.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                try settle(db)
                return .commit
            }
        }
    }
}
