import CPostgres
import Foundation

extension PostgresLoopReader {
    /// One non-blocking connection of a ``PostgresLoopReader``, watched by its loop, in
    /// libpq's pipeline mode: it takes a batch of reads at once (each statement prepared
    /// before its first run on the connection, in the same batch) and sends them in one
    /// write: the reads' statements (one for the reads by key of one kind, and one for
    /// identical reads, ``LoopReadSharing``, unless sent again), a flush request after every
    /// ``PostgresLoopReader/readsPerFlush`` of them, so that PostgreSQL sends their rows as
    /// soon as it has run them, and one `Sync`. PostgreSQL runs them one after another, in
    /// one implicit transaction, each with a snapshot of its own (`READ COMMITTED`; the reads
    /// that share a statement share its snapshot, taken once all of them were asked); the
    /// locks they take on the tables they read are held until the `Sync` (a migration's
    /// exclusive lock waits for the batch). When a statement fails (its own preparation,
    /// say), those after it in the batch are not run: their reads go back to the reader
    /// (``PostgresLoopReader/batchEnded(_:skipped:)``). Heavy reads (``PostgresLoopReader/Lane/heavy``)
    /// have a `Sync` each instead (libpq writes at each): each statement is its own
    /// transaction, answered once run, and fails alone.
    final class Connection: ReactorWatcher {
        /// What the connection waits to hear, in the order it was sent.
        private enum Step {
            /// A statement being prepared under `name` ("": the unnamed statement, once
            /// ``maxPrepared`` are kept).
            case prepare(name: String, key: StatementKey)
            /// A statement of the batch, run (its reads' own, or shared).
            case run(Statement)
            /// A `Sync`: the end of the batch when `last`, else of a heavy read's statement
            /// (what follows runs whatever became of it).
            case sync(last: Bool)
        }

        /// What became of a read asked to join the batch.
        private enum Queued {
            case queued
            /// Refused before sending (a NUL in a text), as the blocking path refuses it.
            case refused(any Error)
            /// libpq took nothing more: the connection is lost.
            case failed
        }

        private let connection: PostgresConnection
        private let fd: Int32
        /// Held strongly: the reader lets its connections go when it closes, or when it drops one.
        private let reader: PostgresLoopReader
        /// The batch in flight, and the step of it being heard.
        private var steps: [Step] = []
        private var step = 0
        /// The rows of the statement being heard, or its error, until libpq says it is done.
        private var result: OpaquePointer?
        private var failure: (any Error)?
        /// Whether the statement being heard was not run (one before it in the batch failed).
        private var skipping = false
        /// The batch's reads to send again: PostgreSQL did not run them, ran them on a
        /// prepared statement it no longer kept, or their shared statement failed.
        private var skipped: [Job] = []
        /// The statements this batch could not prepare: their reads go elsewhere, where one
        /// that never can be prepared fails with its error.
        private var unprepared: Set<StatementKey> = []
        private var prepared: [StatementKey: String] = [:]
        /// Names given so far: each prepared statement's is new (one that failed is not kept).
        private var names = 0
        private var wantsWritable = false
        private var watching = false
        /// When the batch was sent, and when PostgreSQL was last heard from since.
        private var sent = ContinuousClock.now
        private var heard = ContinuousClock.now

        /// Statements kept prepared on a connection at most (a loop reads a few kinds).
        private static let maxPrepared = 64

        var isBroken: Bool { connection.isBroken }
        private var isBusy: Bool { step < steps.count }

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

        /// Sends `batch` (an idle connection's): each read's statement, prepared first when
        /// new (reads by key of one kind, and identical reads, as one: ``LoopReadSharing``),
        /// and one `Sync`, in one write when the socket takes it (heavy reads: a `Sync` after
        /// each statement, ``Lane/heavy``, and libpq writes at each). Reads refused before
        /// sending are answered once the rest are sent.
        func start(_ batch: [Job]) {
            sent = ContinuousClock.now
            heard = sent
            var refused: [(Job, any Error)] = []
            var unsent: [Job] = []
            let statements = Statement.grouping(batch)
            let syncsEach = reader.lane == .heavy
            for (index, statement) in statements.enumerated() {
                let last = index == statements.count - 1
                let flushing = !syncsEach && (index + 1) % PostgresLoopReader.readsPerFlush == 0 && !last
                switch queue(statement, flushing: flushing) {
                case .queued:
                    guard syncsEach, !last else { continue }
                    // Queued: its reads are the batch's now, whatever follows.
                    if PQpipelineSync(connection.connection) == 1 {
                        steps.append(.sync(last: false))
                        continue
                    }
                    unsent = statements[(index + 1)...].flatMap(\.jobs)
                case let .refused(error): refused += statement.jobs.map { ($0, error) }
                case .failed: unsent = statements[index...].flatMap(\.jobs)
                }
                if !unsent.isEmpty { break }
            }
            if unsent.isEmpty, PQpipelineSync(connection.connection) == 1 {
                steps.append(.sync(last: true))
                flush()
            } else {
                lose(unsent: unsent)
            }
            for (job, error) in refused { reader.finished(job, .failure(error)) }
        }

        /// Adds `statement` to the batch (prepared first when new), and a flush request after
        /// it when `flushing` (the batch's `Sync` flushes the last).
        private func queue(_ statement: Statement, flushing: Bool) -> Queued {
            let (sql, arguments) = (statement.sql, statement.arguments)
            let key = StatementKey(sql)
            var name = prepared[key]
            if name == nil {
                let new = prepared.count < Self.maxPrepared ? "l\(names)" : ""
                guard PQsendPrepare(connection.connection, new, PostgresConnection.numbered(sql), 0, nil) == 1 else { return .failed }
                steps.append(.prepare(name: new, key: key))
                if !new.isEmpty {
                    prepared[key] = new
                    names += 1
                }
                name = new
            }
            let queued: Int32
            do {
                queued = try PostgresConnection.withParameters(arguments) { count, values, lengths, formats in
                    PQsendQueryPrepared(connection.connection, name, count, values, lengths, formats, 1)
                }
            } catch {
                return .refused(error)
            }
            guard queued == 1, !flushing || PQsendFlushRequest(connection.connection) == 1 else { return .failed }
            steps.append(.run(statement))
            return .queued
        }

        /// Sends what libpq holds, watching for writability while some is left.
        private func flush() {
            guard isBusy else { return }
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
            heard = ContinuousClock.now
            guard PQconsumeInput(connection.connection) == 1 else { return lose() }
            if isBusy {
                take()
            } else {
                // Parses what the server said to an idle connection (a notice, or why it ends
                // the session), so that it is not taken for the next batch's answer.
                _ = PQisBusy(connection.connection)
            }
            if !isBusy, PQstatus(connection.connection) != CONNECTION_OK { lose() }
        }

        /// The loop's sweep: given up when silent past ``PostgresLoopReader/hung`` with a
        /// batch in flight (its reads are handed back); else the line is looked at again.
        func tick() {
            guard !isHung(at: ContinuousClock.now) else { return lose() }
            reader.progressed()
        }

        func loopStopped() {
            watching = false
            reader.close()
        }

        /// Takes what libpq has read: each statement's results, ending with a null, and the
        /// batch's `Sync`.
        private func take() {
            while isBusy, PQisBusy(connection.connection) == 0 {
                let next = PQgetResult(connection.connection)
                switch steps[step] {
                case let .prepare(name, key):
                    guard let next else {
                        step += 1
                        continue
                    }
                    let status = PQresultStatus(next)
                    if status != PGRES_COMMAND_OK {
                        // Not prepared: its reads are not run either. Not reached (a statement
                        // before it failed), they are sent again; refused (cancelled, say, or a
                        // missing column), they go elsewhere.
                        if !name.isEmpty { prepared[key] = nil }
                        if status != PGRES_PIPELINE_ABORTED {
                            unprepared.insert(key)
                            // Checked for what it says of the connection (broken, or ended).
                            _ = error(of: next, expecting: PGRES_COMMAND_OK, key.sql)
                        }
                    }
                    PQclear(next)
                case let .run(statement):
                    guard let next else {
                        step += 1
                        finish(statement)
                        continue
                    }
                    let status = PQresultStatus(next)
                    if status == PGRES_PIPELINE_ABORTED {
                        skipping = true
                        PQclear(next)
                    } else if result == nil, failure == nil, status == PGRES_TUPLES_OK {
                        result = next
                    } else {
                        if failure == nil { failure = error(of: next, expecting: PGRES_TUPLES_OK, statement.sql) }
                        PQclear(next)
                    }
                case let .sync(last):
                    let status = next.map(PQresultStatus)
                    if let next { PQclear(next) }
                    // Anything but the batch's end is a state the connection cannot be in.
                    guard status == PGRES_PIPELINE_SYNC else { return lose() }
                    guard last else {
                        step += 1
                        continue
                    }
                    steps.removeAll(keepingCapacity: true)
                    step = 0
                    want(writable: false)
                    let skipped = skipped
                    self.skipped.removeAll()
                    unprepared.removeAll()
                    reader.batchEnded(self, skipped: skipped)
                }
            }
        }

        /// Whether it has a batch in flight, sent at `time` or later.
        func hasBatch(sentSince time: ContinuousClock.Instant) -> Bool {
            isBusy && sent >= time
        }

        /// Whether a batch is in flight and PostgreSQL has been silent on it since `time`.
        func isSilent(since time: ContinuousClock.Instant) -> Bool {
            isBusy && heard < time
        }

        /// Whether a batch is in flight and PostgreSQL has been silent past ``hung``.
        private func isHung(at now: ContinuousClock.Instant) -> Bool {
            isBusy && now - heard > PostgresLoopReader.hung
        }

        private func error(of result: OpaquePointer, expecting status: ExecStatusType, _ sql: String) -> (any Error)? {
            do {
                try connection.check(result, expecting: status, sql: sql)
                return nil
            } catch {
                return error
            }
        }

        /// Ends the reads of `statement`, the statement just heard: each with its rows (of
        /// reads by key, the row of its own key) or the statement's error. Kept to be sent
        /// again when it was not run (a statement before it failed) or ran on a stale
        /// prepared statement; run elsewhere when it could not be prepared or the
        /// connection is lost.
        private func finish(_ statement: Statement) {
            let wasSkipped = skipping
            skipping = false
            let outcome: Result<OpaquePointer, any Error>
            if let failure {
                outcome = .failure(failure)
            } else if let result, !wasSkipped {
                outcome = .success(result)
                self.result = nil
            } else {
                outcome = .failure(SQLError(kind: .other, code: "XX000", message: "no result"))
            }
            // A result kept before an error came: never the next read's.
            if let result {
                PQclear(result)
                self.result = nil
            }
            failure = nil
            let key = StatementKey(statement.sql)
            var again = wasSkipped && !unprepared.contains(key)
            var unpreparedRun = false
            if statement.failureIsShared, case .failure = outcome, !wasSkipped { again = true }
            if case let .failure(error as SQLError) = outcome {
                if error.kind == .connection { connection.isBroken = true }
                if PostgresConnection.staleStatement.contains(error.code) {
                    // Prepared before a migration changed what it reads (or dropped on the
                    // server): prepared again when it is sent again. One whose preparation
                    // failed in this batch (before a heavy read's `Sync`, so it ran on no
                    // statement) goes elsewhere, as its preparation's failure says.
                    prepared[key] = nil
                    if unprepared.contains(key) { unpreparedRun = true } else { again = true }
                }
            }
            let jobs = statement.jobs
            if connection.isBroken || again || wasSkipped, case let .success(result) = outcome { PQclear(result) }
            if connection.isBroken || unpreparedRun {
                for job in jobs { reader.finished(job, nil) }
            } else if again {
                skipped += jobs
            } else if wasSkipped {
                for job in jobs { reader.finished(job, nil) }
            } else if case let .one(job) = statement {
                // The result is the read's own: its rows clear it.
                reader.finished(job, outcome.map(PostgresRows.init))
            } else {
                reader.shared(jobs.count)
                let shared = outcome.map(SharedResult.init)
                for job in jobs { reader.finished(job, shared.map { PostgresRows($0, rows: Statement.rows(of: job, in: $0)) }) }
            }
            reader.progressed()
        }

        /// The connection is lost, or given up as hung: the reads of its batch not yet done
        /// (and `unsent`, those of a batch it could not send) are run elsewhere.
        func lose(unsent: [Job] = []) {
            connection.isBroken = true
            reader.lost(self, pending() + unsent)
        }

        /// The reads of the batch not yet done, let go with the batch.
        private func pending() -> [Job] {
            if let result {
                PQclear(result)
                self.result = nil
            }
            let jobs =
                skipped
                + steps[min(step, steps.count)...].flatMap { step -> [Job] in
                    if case let .run(statement) = step { return statement.jobs }
                    return []
                }
            steps.removeAll()
            step = 0
            skipped.removeAll()
            unprepared.removeAll()
            return jobs
        }

        func unwatch() {
            guard watching else { return }
            watching = false
            reader.reactor.unwatch(fd)
        }

        /// Stops watching (the connection closes when let go): the reads of its batch not
        /// yet done, to run elsewhere.
        func close() -> [Job] {
            unwatch()
            connection.isBroken = true
            return pending()
        }
    }
}
