import CatalogModels
import Foundation

/// A storage engine as the store sees it: reads on a lent connection, reads that share
/// one snapshot, and writes submitted to run in a transaction and answered once durable.
/// Everything above this (the business rules) is written once, in the SQL of
/// ``SQLDialect``.
protocol SQLDatabase: Sendable {
    /// What SQL the engine speaks.
    var dialect: any SQLDialect { get }
    /// The engine and its version, such as `SQLite 3.40.1`.
    var version: String { get }
    /// Fired after commits (see ``CommitSignal``).
    var commits: CommitSignal { get }
    /// Runs a read on a lent connection. Single statements need no transaction.
    func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Runs several reads in one read transaction, so they see one snapshot.
    func snapshot<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// As ``snapshot(_:)``, for reads that are mostly one statement (a search), which is a
    /// snapshot of its own. Where a transaction's beginning and end cost round trips
    /// (PostgreSQL), the first statement runs alone, and a body that runs a second is run
    /// again, whole, in a transaction. So `body` may run more than once (as any read may,
    /// after a lost connection): it must only read, and change nothing else it would not
    /// change the same again.
    func oneStatementSnapshot<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Sends the one statement `sql` from `reactor`'s event loop, on the loop's thread,
    /// without blocking it: `completion` runs there with what `body` makes of its rows, or
    /// `nil` to ask for the read to run elsewhere (``LoopReadOutcome/elsewhere``). False, having
    /// started nothing, where reads do not wait on a network (SQLite, read on the loop
    /// itself) or the loop cannot take it now (``PostgresLoopReader``). With `sharing`, the
    /// read may be answered by one statement with other reads sent with it
    /// (``LoopReadSharing``): `body` then sees what `sql` reads, as if run alone. A heavy
    /// read (a search, a geographic list: milliseconds, not microseconds) names its caller
    /// (`heavyCaller`): it is sent apart from the others, a caller holds a few places of
    /// them at most, and it goes elsewhere rather than wait behind slow ones.
    func readOnLoop<T>(
        _ reactor: any ReadReactor, _ sql: String, _ arguments: SQLArguments, sharing: LoopReadSharing?, heavyCaller: String?,
        isAbandoned: @escaping () -> Bool, _ body: @escaping (any SQLRows) throws -> T, completion: @escaping (Result<T, any Error>?) -> Void
    ) -> Bool
    /// A number that stays the same while nothing commits to the database and has changed
    /// once anything has (through this server or any other program): what caches of whole
    /// answers are checked against. Read this before the snapshot an answer is made from,
    /// and keep the answer for that number only. `nil` where the engine cannot tell more
    /// cheaply than by answering (PostgreSQL, which other servers write to), and whenever
    /// it cannot tell at once (every connection lent).
    func generation() throws -> UInt64?
    /// What lets a server remember checked credentials where other servers may change
    /// them (``CredentialWatch``); `nil` where only this server writes (SQLite), which
    /// forgets what it changes itself.
    var credentials: CredentialWatch? { get }
    /// Queues `work` to run inside a write transaction; `completion` receives its result
    /// once the transaction is durable, or its failure (nothing of it is then kept).
    /// - Parameters:
    ///   - options: what the submitter knows of its request (``WriteOptions``).
    ///   - atomic: pass `true` when `work` runs more than one modifying statement.
    ///   - heavy: pass `true` when `work` may take milliseconds (thousands of rows).
    func submit<T: Sendable>(
        _ options: WriteOptions, atomic: Bool, heavy: Bool, _ work: @escaping (any SQLConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void)
    /// Applies the migrations missing from the database, after checking those recorded;
    /// returns the file names applied.
    func migrate(_ migrations: [Migration]) throws -> [String]
    /// Finishes queued writes and closes every connection.
    func close() throws
}

extension SQLDatabase {
    func oneStatementSnapshot<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try snapshot(body)
    }

    func readOnLoop<T>(
        _ reactor: any ReadReactor, _ sql: String, _ arguments: SQLArguments, sharing: LoopReadSharing?, heavyCaller: String?,
        isAbandoned: @escaping () -> Bool, _ body: @escaping (any SQLRows) throws -> T, completion: @escaping (Result<T, any Error>?) -> Void
    ) -> Bool {
        false
    }

    /// ``readOnLoop(_:_:_:sharing:heavyCaller:isAbandoned:_:completion:)`` of a quick read.
    func readOnLoop<T>(
        _ reactor: any ReadReactor, _ sql: String, _ arguments: SQLArguments, sharing: LoopReadSharing?, isAbandoned: @escaping () -> Bool,
        _ body: @escaping (any SQLRows) throws -> T, completion: @escaping (Result<T, any Error>?) -> Void
    ) -> Bool {
        readOnLoop(reactor, sql, arguments, sharing: sharing, heavyCaller: nil, isAbandoned: isAbandoned, body, completion: completion)
    }

    func submit<T: Sendable>(
        _ options: WriteOptions, atomic: Bool = false, heavy: Bool = false,
        _ work: @escaping (any SQLConnection) throws -> T, completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        submit(options, atomic: atomic, heavy: heavy, work, completion: completion)
    }

    /// A write with the default ``WriteOptions``: never dropped, answered on the writer's thread.
    func submit<T: Sendable>(
        atomic: Bool = false, heavy: Bool = false, _ work: @escaping (any SQLConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        submit(WriteOptions(), atomic: atomic, heavy: heavy, work, completion: completion)
    }

    /// Runs `work` as a write and waits for its durable result (`heavy`: in a transaction
    /// of its own, not grouped with requests' writes; `background`: the server's own
    /// background work, ``WriteOptions/background``).
    func write<T: Sendable>(atomic: Bool = false, heavy: Bool = false, background: Bool = false, _ work: @escaping (any SQLConnection) throws -> T) throws -> T {
        let done = NSCondition()
        nonisolated(unsafe) var outcome: Result<T, any Error>?
        // Answered on the writer's thread: this thread waits, so it cannot run the answer.
        submit(background ? .inBackground : WriteOptions(), atomic: atomic, heavy: heavy, work) { result in
            done.lock()
            outcome = result
            done.signal()
            done.unlock()
        }
        done.lock()
        defer { done.unlock() }
        while true {
            if let outcome { return try outcome.get() }
            done.wait()
        }
    }
}

/// What an engine that copies itself online offers (SQLite's backup API); engines
/// without it (PostgreSQL) leave backups to their own tools.
protocol SQLBackups {
    /// Writes a consistent copy of the database to `destination` (a new file), checked
    /// for integrity, stopping when `isCancelled` says so.
    /// - Returns: the copy's size in bytes.
    func backup(to destination: String, isCancelled: @escaping () -> Bool) throws -> Int
}

/// How a read sent from a loop may share one statement with other reads of its batch
/// (``SQLDatabase/readOnLoop(_:_:_:sharing:isAbandoned:_:completion:)``): PostgreSQL then
/// starts one statement for them, and the loop reads one result.
enum LoopReadSharing {
    /// A read of one row by its key (a GET by id), with the batch's other reads of the kind:
    /// `sql` reads the rows of the keys bound as one JSON array of strings, each row with its
    /// key as the text of column `column`; each read sees the row of its own key alone. The
    /// keys are ids, whose text needs no escape in JSON.
    case byKey(sql: String, key: CatalogID, column: Int32)
    /// A read whose statement and arguments another read of the batch has too (one list
    /// page, asked by many at once): run once, each read seeing all its rows. They see one
    /// snapshot, taken once every one of them was asked.
    case identical
}
