import Foundation
import Synchronization

/// PostgreSQL through libpq, for deployments of several stateless servers on one
/// database. Reads borrow a pooled connection (a snapshot is a REPEATABLE READ, READ
/// ONLY transaction); writes run in READ COMMITTED transactions on a few writer threads
/// (grouped: ``GroupCommit`` of ``PostgresWriter``s), locking what they check (``SQLDialect/forUpdate``),
/// and run again after a serialization failure or a deadlock (SQLSTATE 40001, 40P01). A write's
/// completion runs once its COMMIT has returned: durable, with the server's default
/// `synchronous_commit`.
final class PostgresDatabase: SQLDatabase, @unchecked Sendable {
    private let url: String
    private let readers: ConnectionPool<PostgresConnection>
    private let writes: GroupCommit<PostgresWriter>
    let version: String
    let commits = CommitSignal()
    let credentials: CredentialWatch?
    /// Whether the thread listening for the change log's notifications goes on.
    private let listening = Atomic<Bool>(true)
    /// Signalled once that thread has closed its connection and ended (``close()`` waits for it).
    private let listenerEnded = DispatchSemaphore(value: 0)
    /// Left once ``close()`` has finished: later calls wait for it.
    private let closed = DispatchGroup()
    /// Each event loop's readers, one a lane (``readOnLoop(_:_:_:sharing:heavyCaller:isAbandoned:_:completion:)``),
    /// each made at its first read.
    private let loopReaders = Mutex<(readers: [LoopLane: PostgresLoopReader], closed: Bool)>(([:], false))
    /// The event loops that may read (``PostgresLoopReader/connections(loops:lane:)``).
    private let loopCount: Int
    /// The loops' threads making connections (``close()`` waits for them).
    private let loopConnecting = DispatchGroup()
    /// What became of the loops' reads.
    let loopReadCounts = PostgresLoopReader.Counts()
    /// How many reads ``oneStatementSnapshot(_:)`` ran again in a snapshot: none while a
    /// search is one statement here (`OneStatementReadTests`).
    let snapshotReruns = Atomic<Int>(0)

    var dialect: any SQLDialect { PostgreSQLDialect() }

    /// How long a read waits for a free connection before it fails as busy.
    static let connectionWait: Duration = .seconds(5)

    /// Connects to `url` (a libpq URL or connection string); fails when the server cannot
    /// be reached. `loops` event loops may read through connections of their own.
    init(url: String, readers: Int, loops: Int) throws {
        self.url = url
        loopCount = loops
        let first: PostgresConnection
        do {
            first = try PostgresConnection(url: url, settings: Self.readerSettings)
        } catch let error as SQLError {
            throw StoreError.unavailable("cannot connect to PostgreSQL at \(Self.redacted(url)): \(Self.redacted(error.message, of: url))")
        }
        version = "PostgreSQL " + first.serverVersion
        self.readers = ConnectionPool(size: max(2, readers), wait: Self.connectionWait) { try PostgresConnection(url: url, settings: Self.readerSettings) }
        self.readers.give(first)
        let writers = (0..<PostgresWriter.defaultCount).map { _ in
            PostgresWriter { try PostgresConnection(url: url, settings: Self.writerSettings) }
        }
        writes = GroupCommit(writers, name: "catalog-writer", maxBatch: PostgresWriter.maxBatch, commits: commits)
        let readers = self.readers
        credentials = CredentialWatch { sql, arguments in
            try readers.with { connection in try connection.fetchValue(sql, arguments) }
        }
        closed.enter()
        let thread = Thread { [self] in listen() }
        thread.name = "catalog-listener"
        thread.start()
    }

    /// Fires ``commits`` for each commit any replica makes to the change log (its
    /// triggers notify `catalog_changes`), on a connection of its own that is made again
    /// when lost (firing then too, as notifications may have been missed meanwhile); and
    /// keeps ``credentials``' lease, renewed at each change of credentials
    /// (`catalog_credentials`) and every second (lapsed while the connection is lost).
    private func listen() {
        var connection: PostgresConnection?
        var failures: UInt32 = 0
        while listening.load(ordering: .relaxed) {
            do {
                let current: PostgresConnection
                if let connection {
                    current = connection
                } else {
                    current = try PostgresConnection(url: url, settings: "")
                    try current.script("LISTEN catalog_changes; LISTEN catalog_credentials")
                    connection = current
                    commits.fire()
                }
                let heard = try current.awaitNotifications(milliseconds: 250)
                if heard.contains("catalog_changes") { commits.fire() }
                if let credentials, heard.contains("catalog_credentials") || credentials.isDue { try credentials.renew(on: current) }
                failures = 0
            } catch {
                credentials?.lapse()
                connection = nil
                failures += 1
                usleep(min(failures, 20) * 100_000)
            }
        }
        // Closed here, before the store says it is closed: a process that exits then must
        // not find this thread still inside libpq.
        if let connection { credentials?.end(on: connection) }
        connection = nil
        listenerEnded.signal()
    }

    /// Readers never write, and give up on a lock they would wait for long.
    /// Their isolation is `READ COMMITTED` whatever the server's default: a statement alone
    /// reads one snapshot of its own, and is never cancelled as a serializable one may be.
    private static let readerSettings =
        "SET default_transaction_read_only = on; SET default_transaction_isolation = 'read committed'; SET lock_timeout = '5s'; SET idle_in_transaction_session_timeout = '60s'"
    /// A write waits at most 5 s for a lock (SQLite's busy timeout) and runs at most a minute.
    private static let writerSettings = "SET lock_timeout = '5s'; SET statement_timeout = '60s'; SET idle_in_transaction_session_timeout = '60s'"

    /// The least statement timeout of a read. Reads here never run on an event loop (they
    /// wait on the network), so the inline budget, which keeps loops free, does not apply;
    /// the timeout bounds what one request costs the database, counted in wall time,
    /// waits for the server included.
    static let minimumAllowance: Duration = .seconds(1)

    func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try reading(body)
    }

    /// Other servers commit without this one hearing of it in time: answers are not kept.
    func generation() throws -> UInt64? { nil }

    func snapshot<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try reading { connection in try connection.inTransaction(Self.beginSnapshot) { try body(connection) } }
    }

    /// How a snapshot begins: every statement of the transaction reads as of its first.
    private static let beginSnapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"

    /// One statement alone: BEGIN and COMMIT would be two more round trips. A body that runs
    /// a second statement (or tried to) runs again in a transaction, counted in
    /// ``snapshotReruns``.
    func oneStatementSnapshot<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try reading { connection in
            let alone = OneStatementRead(connection)
            do {
                let result = try body(alone)
                if alone.isAlone { return result }
            } catch  where alone.isAlone {
                throw error
            } catch {
                // It tried a second statement.
            }
            snapshotReruns.add(1, ordering: .relaxed)
            return try connection.inTransaction(Self.beginSnapshot) { try body(connection) }
        }
    }

    /// Runs a read on a pooled connection, under the calling thread's read budget; once
    /// more on a new one when the connection turns out to have died while idle (a server
    /// restart, a failover) or held a stale statement (a migration changed what it reads),
    /// or when PostgreSQL asks for it (a deadlock): reads can be repeated.
    private func reading<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let limited = { (connection: PostgresConnection) throws -> T in
            try connection.limit(to: max(ReadBudget.allowance, Self.minimumAllowance))
            return try body(connection)
        }
        do {
            return try readers.with(limited)
        } catch let error as SQLError where error.kind == .connection || PostgresConnection.staleStatement.contains(error.code) {
            // The idle ones most likely died with it, or hold the same stale statements.
            readers.dropIdle()
            return try readers.with(limited)
        } catch let error as SQLError where error.kind == .retry {
            return try readers.with(limited)
        }
    }

    func readOnLoop<T>(
        _ reactor: any ReadReactor, _ sql: String, _ arguments: SQLArguments, sharing: LoopReadSharing?, heavyCaller: String?,
        isAbandoned: @escaping () -> Bool, _ body: @escaping (any SQLRows) throws -> T, completion: @escaping (Result<T, any Error>?) -> Void
    ) -> Bool {
        guard reactor.isCurrent else { return false }
        let lane: PostgresLoopReader.Lane = heavyCaller == nil ? .quick : .heavy
        let key = LoopLane(loop: reactor.id, lane: lane)
        let reader = loopReaders.withLock { loops -> PostgresLoopReader? in
            guard !loops.closed else { return nil }
            if let reader = loops.readers[key] { return reader }
            let url = url
            let reader = PostgresLoopReader(
                reactor: reactor, lane: lane, limit: PostgresLoopReader.connections(loops: loopCount, lane: lane), counts: loopReadCounts,
                connectingThreads: loopConnecting
            ) { [weak self] closed in
                self?.forget(closed)
            } connect: {
                try PostgresConnection(url: url, settings: Self.loopReaderSettings + "; SET application_name = '\(lane.applicationName)'")
            }
            loops.readers[key] = reader
            return reader
        }
        guard let reader else { return false }
        let job = PostgresLoopReader.Job(sql: sql, arguments: arguments, sharing: sharing, caller: heavyCaller, isAbandoned: isAbandoned) { outcome in
            completion(outcome.map { result in result.flatMap { rows in Result { try body(rows) } } })
        }
        return reader.read(job)
    }

    /// A loop's reader of one lane.
    private struct LoopLane: Hashable {
        let loop: ObjectIdentifier
        let lane: PostgresLoopReader.Lane
    }

    /// A loop's readers: a reader's, each statement stopping after the least allowance of
    /// a read (their one statement is the whole read; the expensive reads' allowance is
    /// the same). They name themselves by lane where PostgreSQL lists its sessions
    /// (``PostgresLoopReader/Lane/applicationName``).
    private static let loopReaderSettings = readerSettings + "; SET statement_timeout = \(minimumAllowance.components.seconds * 1000)"

    func submit<T: Sendable>(
        _ options: WriteOptions, atomic: Bool, heavy: Bool, _ work: @escaping (any SQLConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        // A write that keeps its answer too is two statements at least: all or nothing.
        writes.submit(
            options, atomic: atomic || options.inTransaction != nil, heavy: heavy, options.wrapping(work, completion: completion),
            completion: completion)
    }

    /// Migrates on a connection of its own, holding a session advisory lock: replicas
    /// starting at once migrate one after another, and the later ones find nothing to do.
    func migrate(_ migrations: [Migration]) throws -> [String] {
        let connection = try PostgresConnection(url: url, settings: "SET lock_timeout = 0; SET statement_timeout = 0")
        try connection.script("SELECT pg_advisory_lock(\(Self.migrationLock))")
        defer { try? connection.script("SELECT pg_advisory_unlock(\(Self.migrationLock))") }
        return try MigrationRunner.migrate(connection, migrations: migrations) { body in
            try connection.inTransaction { try body() }
        } script: { sql in
            try connection.script(sql)
        }
    }

    /// Lets a closed reader go with its loop (whose identity a later loop may then reuse).
    private func forget(_ reader: PostgresLoopReader) {
        loopReaders.withLock { loops in
            let key = LoopLane(loop: reader.reactor.id, lane: reader.lane)
            if loops.readers[key] === reader { loops.readers[key] = nil }
        }
    }

    /// Closes every loop's connections on its loop (a loop that has stopped closed them
    /// when it stopped), waiting a few seconds at most for the loops to get to it.
    private func closeLoopReaders() {
        let readers = loopReaders.withLock { loops in
            defer {
                loops.readers.removeAll()
                loops.closed = true
            }
            return Array(loops.readers.values)
        }
        let done = DispatchGroup()
        for reader in readers {
            done.enter()
            if !reader.reactor.execute({
                reader.close()
                done.leave()
            }) {
                done.leave()
            }
        }
        _ = done.wait(timeout: .now() + .seconds(5))
        // A connection being made is closed by its thread once the loop refuses it: not
        // for ever (as the listener's, bounded for a database that stopped answering).
        _ = loopConnecting.wait(timeout: .now() + .seconds(10))
    }

    /// The advisory lock key of migrations (`catalog` in ASCII).
    private static let migrationLock: Int64 = 0x63_61_74_61_6C_6F_67

    /// Finishes queued writes and closes every connection, the listener's too: nothing of
    /// libpq runs on any of the engine's threads once it returns.
    func close() throws {
        guard listening.exchange(false, ordering: .relaxed) else { return closed.wait() }
        closeLoopReaders()
        writes.stop()
        readers.close()
        // The listener notices within its wait (250 ms), or after a connection attempt,
        // which a database that stopped answering may hold up: not for ever.
        _ = listenerEnded.wait(timeout: .now() + .seconds(10))
        closed.leave()
    }

    /// `url` without its password (in the user-information part or a `password=` parameter).
    static func redacted(_ url: String) -> String {
        var text = url
        for password in passwords(in: url) { text = text.replacingOccurrences(of: password, with: "***") }
        return text
    }

    /// `message` (libpq's, which may repeat part of the URL) without the password of `url`,
    /// as written and percent-decoded.
    static func redacted(_ message: String, of url: String) -> String {
        var text = message
        for password in passwords(in: url) {
            text = text.replacingOccurrences(of: password, with: "***")
            if let decoded = password.removingPercentEncoding { text = text.replacingOccurrences(of: decoded, with: "***") }
        }
        return text
    }

    /// The passwords `url` holds: in its user information, and in `password=` parameters
    /// (whole keys only: not `sslpassword=`).
    private static func passwords(in url: String) -> [String] {
        var found: [String] = []
        if let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].firstIndex(of: "@"),
            let colon = url[scheme.upperBound..<at].firstIndex(of: ":"), url.index(after: colon) < at
        {
            found.append(String(url[url.index(after: colon)..<at]))
        }
        var rest = url[...]
        while let range = rest.range(of: "password=") {
            let before = range.lowerBound == rest.startIndex ? nil : rest[rest.index(before: range.lowerBound)]
            let end = rest[range.upperBound...].firstIndex { $0 == "&" || $0 == " " } ?? rest.endIndex
            if before == nil || before == "?" || before == "&" || before == " " {
                let value = String(rest[range.upperBound..<end])
                if !value.isEmpty { found.append(value) }
            }
            rest = rest[end...]
        }
        return found.sorted { $0.count > $1.count }
    }
}

/// Statements run outside any store, on a connection of their own (creating and dropping
/// the databases of tests).
package enum PostgresAdmin {
    /// Runs `sql` (statements without parameters) on the database at `url`.
    package static func run(_ sql: String, at url: String) throws {
        try PostgresConnection(url: url, settings: "").script(sql)
    }

    /// The integer in the first column of the first row of `sql` (without parameters) on
    /// the database at `url`.
    package static func integer(_ sql: String, at url: String) throws -> Int64? {
        try PostgresConnection(url: url, settings: "").fetchValue(sql).int64
    }
}
