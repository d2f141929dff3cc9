import CPostgres

/// A writer's transaction sent in libpq's pipeline mode (``inDeferredTransaction(_:_:)``):
/// statements whose results are not read at once, rows of one insert gathered into one
/// statement, and what they answered read at the next statement that waits.
extension PostgresConnection {
    /// Sends the statement on in pipeline mode when ``defersStatements`` (prepared in the
    /// same pipeline when new), without waiting: a batch's writes then reach PostgreSQL in
    /// one write and their results come back together, where each waited for its own
    /// round trip. The connection blocks, yet never waits on a server that waits for it to
    /// read: libpq reads what the server sends while a send of its own waits.
    func executeDeferred(_ sql: String, _ arguments: SQLArguments) throws {
        try sendGathered()
        let key = StatementKey(sql)
        // Past the prepared statements' bound, `execute` deallocates them first.
        guard defersStatements, prepared[key] != nil || names < Self.maxPrepared else {
            _ = try execute(sql, arguments)
            return
        }
        if !pipelining {
            guard PQenterPipelineMode(connection) == 1 else { throw lost() }
            pipelining = true
        }
        let name: String
        if let known = prepared[key] {
            name = known
        } else {
            name = "s\(names)"
            guard PQsendPrepare(connection, name, Self.numbered(sql), 0, nil) == 1 else { throw lost() }
            prepared[key] = name
            names += 1
            deferred.append((sql, key))
        }
        let sent = try Self.withParameters(arguments) { count, values, lengths, formats in
            PQsendQueryPrepared(connection, name, count, values, lengths, formats, 1)
        }
        guard sent == 1 else { throw lost() }
        deferred.append((sql, nil))
    }

    /// Gathers the row when ``defersStatements``, to be sent with the rows of the same
    /// insert deferred after it, in one statement each of 1, 2, 4 … 64 rows (so that an
    /// insert takes at most seven prepared statements): PostgreSQL then starts the
    /// statement, and its trigger's plan, once for them all, not once a row.
    func insertDeferred(_ insert: RowInsert, _ arguments: SQLArguments) throws {
        guard defersStatements else {
            _ = try execute(insert.sql, arguments)
            return
        }
        if let held = gathered, held.insert.sql == insert.sql, held.rows.count < Self.maxGathered {
            gathered?.rows.append(arguments)
            return
        }
        try sendGathered()
        gathered = (insert, [arguments])
    }

    /// Sends the rows gathered (``insertDeferred(_:_:)``) on, in statements of as many rows
    /// as the largest power of two left.
    private func sendGathered() throws {
        guard let (insert, rows) = gathered else { return }
        gathered = nil
        var start = 0
        while start < rows.count {
            let count = 1 << (Int.bitWidth - 1 - (rows.count - start).leadingZeroBitCount)
            try executeDeferred(insert.sql(rows: count), Array(rows[start..<start + count].joined()))
            start += count
        }
    }

    /// Reads the results of what ``executeDeferred(_:_:)`` sent, through the pipeline's
    /// end, and leaves pipeline mode; throws the first failure among them (those after it
    /// were not run). A statement whose preparation was not run is forgotten.
    func awaitDeferred() throws {
        try sendGathered()
        guard pipelining else { return }
        let steps = deferred
        deferred.removeAll(keepingCapacity: true)
        pipelining = false
        guard PQpipelineSync(connection) == 1 else { throw lost() }
        var failure: (any Error)?
        for step in steps {
            while let result = PQgetResult(connection) {
                defer { PQclear(result) }
                do { try check(result, of: step) } catch { failure = failure ?? error }
            }
            if isBroken { throw failure ?? lost() }
        }
        let end = PQgetResult(connection)
        let ended = end.map(PQresultStatus) == PGRES_PIPELINE_SYNC
        if let end { PQclear(end) }
        guard ended, PQexitPipelineMode(connection) == 1 else {
            // The connection is in a state it cannot be in: given up.
            let broken = lost()
            throw failure ?? broken
        }
        if let failure { throw failure }
    }

    /// Throws the failure `result` says of `step`: none for a statement skipped because
    /// one before it failed. A preparation that was not run is forgotten, and its failure
    /// is the statement's own (``checkPrepared(_:expecting:sql:)``'s stale statements are
    /// those prepared before). PostgreSQL answers the `COMMIT` of a transaction that a
    /// caught failure left aborted with `ROLLBACK`, not an error: that is a failure too.
    private func check(_ result: OpaquePointer, of step: (sql: String, preparing: StatementKey?)) throws {
        let status = PQresultStatus(result)
        if let key = step.preparing, status != PGRES_COMMAND_OK { prepared[key] = nil }
        guard status != PGRES_PIPELINE_ABORTED else { return }
        if step.preparing != nil { return try check(result, expecting: PGRES_COMMAND_OK, sql: step.sql) }
        try checkPrepared(result, expecting: PGRES_COMMAND_OK, sql: step.sql)
        if step.sql == Self.commit, String(cString: PQcmdStatus(result)) != Self.commit {
            throw SQLError(kind: .other, code: "25P02", message: "the transaction was rolled back at its commit: a statement in it failed")
        }
    }

    /// Runs `body` in a transaction opened by the statements of `begin`, sending them,
    /// `body`'s deferred statements (``executeDeferred(_:_:)``) and the `COMMIT` on without
    /// waiting, so that they reach PostgreSQL together and their results come back
    /// together: a transaction that only writes takes one round trip, and none while it
    /// holds its locks. A statement that waits for its result (one that returns rows, a
    /// savepoint) first reads what was sent before it and throws the first failure among
    /// those, so a failure surfaces there or at the commit. Committed when `body` returns;
    /// rolled back when it, or the commit, throws.
    func inDeferredTransaction<T>(_ begin: [String], _ body: () throws -> T) throws -> T {
        defersStatements = true
        defer { defersStatements = false }
        do {
            for statement in begin { try executeDeferred(statement, []) }
            let result = try body()
            try executeDeferred(Self.commit, [])
            try awaitDeferred()
            return result
        } catch {
            rollBack()
            throw error
        }
    }

    private static let commit = "COMMIT"

    /// Undoes what was written since the savepoint `name` and releases it; rows gathered
    /// since (``insertDeferred(_:_:)``) are dropped unsent.
    func rollBack(toSavepoint name: String) throws {
        gathered = nil
        try script("ROLLBACK TO SAVEPOINT \(name); RELEASE SAVEPOINT \(name)")
    }

    /// Rolls the transaction back, once what was sent in it is read (whatever it says).
    func rollBack() {
        gathered = nil
        try? awaitDeferred()
        try? script("ROLLBACK")
    }

    /// Begins a writer's transaction and takes the change log's lock for the rest of it
    /// (statements for ``inDeferredTransaction(_:_:)``, sent on with the writes, so that
    /// PostgreSQL takes the lock when they reach it). Writers take it first, before any
    /// row lock (everything goes out on one connection, in order), so that the change
    /// log's triggers (which take it too) never wait for it while holding a row another
    /// writer waits for. See `Migrations/postgresql/0002_change_log.sql`. It may be held
    /// by a long write (an import), so the wait for it may last as long as a write
    /// statement may run (60 s), not the 5 s of a row lock.
    static let beginLockingChangeLog = ["BEGIN", "SELECT set_config('lock_timeout', '60s', true), pg_advisory_xact_lock(7031950146)"]
}
