import CPostgres
import Foundation

extension PostgresLoopReader {
    /// One non-blocking connection of a ``PostgresLoopReader``, watched by its loop: one
    /// statement at a time, prepared before its first run (one round trip more, once).
    final class Connection: ReactorWatcher {
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
        private var job: Job?
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
        func start(_ job: Job) {
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

        /// Whether its statement has been in flight past ``hung``.
        func isHung(at now: ContinuousClock.Instant) -> Bool {
            job != nil && now - sent > PostgresLoopReader.hung
        }

        private func note(_ result: OpaquePointer, expecting status: ExecStatusType, _ job: Job) {
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

        /// The connection is lost, or given up as hung: its job, if any, is run elsewhere.
        func lose() {
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
        func close() -> Job? {
            unwatch()
            connection.isBroken = true
            defer {
                job = nil
                phase = .idle
            }
            return job
        }
    }
}
