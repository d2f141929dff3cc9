import CPostgres
import Foundation

/// One libpq connection, speaking ``SQLConnection``: statements are prepared once per
/// connection (named, with `?` parameters numbered for PostgreSQL) and results come in
/// binary, read in place. Not shared: a connection serves one thread at a time.
final class PostgresConnection: SQLConnection, PooledConnection {
    let connection: OpaquePointer
    /// Prepared statement names by SQL text.
    var prepared: [StatementKey: String] = [:]
    /// Names given since the last `DEALLOCATE ALL`: each statement's is new (one forgotten
    /// as stale keeps its name on the server).
    var names = 0
    /// The statement timeout set on the session, in milliseconds (0: none).
    private var statementTimeout: Int64 = -1
    /// Set once the connection has failed: the pool then drops it.
    var isBroken = false
    // The pipeline's state (PostgresConnection+Pipeline.swift).
    /// Whether ``executeDeferred(_:_:)`` sends its statement on in pipeline mode rather
    /// than waiting for its result: inside ``inDeferredTransaction(_:_:)``.
    var defersStatements = false
    /// What was sent in pipeline mode and not yet read (``awaitDeferred()``): each step's
    /// SQL, and for a statement prepared in the pipeline, its key.
    var deferred: [(sql: String, preparing: StatementKey?)] = []
    /// Whether the connection is in pipeline mode.
    var pipelining = false
    /// Rows of one ``RowInsert`` deferred one after another, not yet sent
    /// (``insertDeferred(_:_:)``).
    var gathered: (insert: RowInsert, rows: [SQLArguments])?
    /// The most rows sent in one statement: a writer's batch.
    static let maxGathered = RowInsert.maxRows

    /// The most statements kept prepared; past it they are all deallocated.
    static let maxPrepared = 512

    var dialect: any SQLDialect { PostgreSQLDialect() }

    /// Connects to `url` (any libpq connection string) and sets the session up.
    /// - Parameter settings: `SET` statements run once connected.
    init(url: String, settings: String) throws {
        if let failure = cpostgres_load() {
            throw SQLError(kind: .connection, code: "08000", message: "PostgreSQL needs libpq (libpq5): \(String(cString: failure))")
        }
        guard let connection = Self.connect(url) else {
            throw SQLError(kind: .connection, code: "08000", message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(connection))
            PQfinish(connection)
            throw SQLError(kind: .connection, code: "08001", message: PostgresDatabase.redacted(message))
        }
        // From here on, deinit finishes the connection (also when the settings fail).
        self.connection = connection
        try script("SET client_encoding = 'UTF8'; SET DateStyle = 'ISO'; SET client_min_messages = warning; \(settings)")
    }

    deinit { PQfinish(connection) }

    /// How long making a connection may take, in seconds, unless the URL or
    /// `PGCONNECT_TIMEOUT` says: libpq would otherwise wait for ever for a server that
    /// accepts the connection and never answers (and the kernel's retries, minutes, for one
    /// whose address drops every packet).
    static let defaultConnectTimeout = 10

    /// libpq's connection to `url`, with ``defaultConnectTimeout`` beneath what the URL sets
    /// (its parameters are expanded after the default, so they win).
    private static func connect(_ url: String) -> OpaquePointer? {
        var keywords = ["dbname"], values = [url]
        if ProcessInfo.processInfo.environment["PGCONNECT_TIMEOUT"] == nil {
            keywords.insert("connect_timeout", at: 0)
            values.insert(String(defaultConnectTimeout), at: 0)
        }
        // NULL-terminated arrays of C strings, freed once libpq has copied them.
        let keywordStrings = keywords.map { strdup($0) }, valueStrings = values.map { strdup($0) }
        defer { for string in keywordStrings + valueStrings { free(string) } }
        let keywordArray = keywordStrings.map { $0.map { UnsafePointer($0) } } + [nil]
        let valueArray = valueStrings.map { $0.map { UnsafePointer($0) } } + [nil]
        return keywordArray.withUnsafeBufferPointer { keywords in
            valueArray.withUnsafeBufferPointer { values in PQconnectdbParams(keywords.baseAddress, values.baseAddress, 1) }
        }
    }

    /// The server's version, such as `15.18`.
    var serverVersion: String {
        let number = PQserverVersion(connection)
        return "\(number / 10000).\(number % 10000)"
    }

    func query(_ sql: String, _ arguments: SQLArguments) throws -> PostgresRows {
        PostgresRows(try run(sql, arguments, expecting: PGRES_TUPLES_OK))
    }

    func execute(_ sql: String, _ arguments: SQLArguments) throws -> Int {
        let result = try run(sql, arguments, expecting: PGRES_COMMAND_OK)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// Marks the connection broken, with what libpq says of it.
    func lost() -> SQLError {
        isBroken = true
        return SQLError(kind: .connection, code: "08006", message: Self.message(PQerrorMessage(connection)))
    }

    /// Runs SQL of several statements, without parameters (migrations, session settings,
    /// transaction control), once what was sent before it is answered.
    func script(_ sql: String) throws {
        try awaitDeferred()
        let result = PQexec(connection, sql)
        defer { PQclear(result) }
        try check(result, expecting: PGRES_COMMAND_OK, sql: sql)
    }

    /// Runs `body` in a transaction opened by `begin` (which may hold more statements,
    /// sent with it in one round trip): committed when it returns, rolled back when it
    /// or `begin` throws.
    func inTransaction<T>(_ begin: String = "BEGIN", _ body: () throws -> T) throws -> T {
        do {
            try script(begin)
        } catch {
            rollBack()
            throw error
        }
        do {
            let result = try body()
            try script("COMMIT")
            return result
        } catch {
            rollBack()
            throw error
        }
    }

    /// Waits up to `milliseconds` for notifications (of channels this connection
    /// listens to): the channels of those that arrived.
    func awaitNotifications(milliseconds: Int32) throws -> Set<String> {
        var ready = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
        guard ready.fd >= 0 else {
            isBroken = true
            throw SQLError(kind: .connection, code: "08006", message: "the connection has no socket")
        }
        // Notifications libpq took in while this connection ran a statement wait in its
        // queue, not on the socket: they are answered before any wait.
        let queued = takeNotifications()
        if !queued.isEmpty { return queued }
        if poll(&ready, 1, milliseconds) > 0, PQconsumeInput(connection) != 1 {
            isBroken = true
            throw SQLError(kind: .connection, code: "08006", message: Self.message(PQerrorMessage(connection)))
        }
        return takeNotifications()
    }

    /// The channels of the notifications libpq holds, taken from it.
    private func takeNotifications() -> Set<String> {
        var received: Set<String> = []
        while let notification = PQnotifies(connection) {
            if let channel = notification.pointee.relname { received.insert(String(cString: channel)) }
            PQfreemem(notification)
        }
        return received
    }

    /// Makes each statement stop after `allowance` (PostgreSQL's statement timeout),
    /// setting it only when it changes.
    func limit(to allowance: Duration) throws {
        let milliseconds = max(1, allowance.components.seconds * 1000 + allowance.components.attoseconds / 1_000_000_000_000_000)
        guard milliseconds != statementTimeout else { return }
        try script("SET statement_timeout = \(milliseconds)")
        statementTimeout = milliseconds
    }

    /// Prepares `sql` when new, binds `arguments` (text, except blobs in binary) and runs it.
    /// What was sent before it is answered first.
    private func run(_ sql: String, _ arguments: SQLArguments, expecting status: ExecStatusType) throws -> OpaquePointer {
        try awaitDeferred()
        let name = try statement(sql)
        let result: OpaquePointer? = try Self.withParameters(arguments) { count, values, lengths, formats in
            PQexecPrepared(connection, name, count, values, lengths, formats, 1)
        }
        do {
            try checkPrepared(result, expecting: status, sql: sql)
        } catch {
            PQclear(result)
            throw error
        }
        guard let result else { throw SQLError(kind: .connection, code: "08006", message: "no result") }
        return result
    }

    /// ``check(_:expecting:sql:)`` for a prepared statement's result: one prepared before a
    /// migration changed what it reads (or dropped on the server) is forgotten, to be
    /// prepared anew when the work runs again.
    func checkPrepared(_ result: OpaquePointer?, expecting status: ExecStatusType, sql: String) throws {
        do {
            try check(result, expecting: status, sql: sql)
        } catch let error as SQLError where Self.staleStatement.contains(error.code) {
            prepared[StatementKey(sql)] = nil
            throw SQLError(kind: .retry, code: error.code, message: error.message)
        }
    }

    /// Calls `body` with `arguments` as libpq takes them: their count, values, lengths and
    /// formats (text NUL-terminated, except blobs in binary), all in one buffer.
    static func withParameters<R>(
        _ arguments: SQLArguments, _ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> R
    ) throws -> R {
        // Every parameter's bytes in one buffer (text NUL-terminated), with its place.
        var storage: [UInt8] = []
        var places: [(offset: Int, length: Int32)?] = []
        var formats: [Int32] = []
        places.reserveCapacity(arguments.count)
        formats.reserveCapacity(arguments.count)
        for argument in arguments {
            let value = argument.sqlValue
            let offset = storage.count
            switch value {
            case .null: places.append(nil)
            case let .integer(number): storage += "\(number)".utf8
            case let .real(number): storage += "\(number)".utf8
            case let .text(text):
                // PostgreSQL's text holds no NUL, and a text parameter ends at one: refuse
                // rather than look up (or store) a shorter string than was given.
                guard !Self.holdsNUL(text) else {
                    throw SQLError(kind: .other, code: "22021", message: "a text parameter holds a NUL byte")
                }
                storage += text.utf8
            case let .blob(bytes): storage += bytes
            }
            if case .null = value { formats.append(0); continue }
            let length = storage.count - offset
            if case .blob = value { formats.append(1) } else { formats.append(0); storage.append(0) }
            places.append((offset, Int32(length)))
        }
        storage.append(0)
        let lengths = places.map { $0?.length ?? 0 }
        return storage.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress)
            let pointers = places.map { place in place.flatMap { base?.advanced(by: $0.offset).assumingMemoryBound(to: CChar.self) } }
            return body(Int32(arguments.count), pointers, lengths, formats)
        }
    }

    /// Whether `text` holds a NUL byte: over its contiguous UTF-8 with `memchr` (a
    /// native string's; stepping through a `UTF8View` costs far more).
    private static func holdsNUL(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0, bytes.count) != nil
        } ?? text.utf8.contains(0)
    }

    /// The prepared statement's name for `sql`, preparing it on first use.
    private func statement(_ sql: String) throws -> String {
        if let name = prepared[StatementKey(sql)] { return name }
        if names >= Self.maxPrepared {
            try script("DEALLOCATE ALL")
            prepared.removeAll()
            names = 0
        }
        let name = "s\(names)"
        let result = PQprepare(connection, name, Self.numbered(sql), 0, nil)
        defer { PQclear(result) }
        try check(result, expecting: PGRES_COMMAND_OK, sql: sql)
        prepared[StatementKey(sql)] = name
        names += 1
        return name
    }

    /// `sql` with each `?` outside quotes replaced by `$1`, `$2`, … in order.
    static func numbered(_ sql: String) -> String {
        var output = ""
        output.reserveCapacity(sql.utf8.count + 16)
        var number = 0
        var quote: Character?
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                output.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                output.append(character)
            } else if character == "?" {
                number += 1
                output += "$\(number)"
            } else {
                output.append(character)
            }
        }
        return output
    }

    /// Throws the error `result` holds unless it has `status` (tuples will do for a command).
    func check(_ result: OpaquePointer?, expecting status: ExecStatusType, sql: String) throws {
        let actual = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        if actual == status || (status == PGRES_COMMAND_OK && actual == PGRES_TUPLES_OK) { return }
        let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) } ?? "XX000"
        let message = result.map { Self.message(PQresultErrorMessage($0)) } ?? Self.message(PQerrorMessage(connection))
        if PQstatus(connection) != CONNECTION_OK || Self.ending.contains(state) { isBroken = true }
        throw SQLError(kind: Self.kind(state, connectionLost: isBroken), code: state, message: message.isEmpty ? "\(actual) running \(sql)" : message)
    }

    /// The SQLSTATEs of a prepared statement PostgreSQL cannot run as it was prepared:
    /// `feature_not_supported` ("cached plan must not change result type", after a
    /// migration changed a table it reads) and `invalid_sql_statement_name`.
    static let staleStatement: Set<String> = ["0A000", "26000"]

    /// The SQLSTATEs of a server ending the session: `admin_shutdown`, `crash_shutdown`,
    /// `cannot_connect_now`, `database_dropped`, `idle_session_timeout`.
    private static let ending: Set<String> = ["57P01", "57P02", "57P03", "57P04", "57P05"]

    /// The class of an SQLSTATE (PostgreSQL appendix A).
    static func kind(_ state: String, connectionLost: Bool = false) -> SQLError.Kind {
        // Only a connection that is gone counts as lost (a protocol error on a live one, such
        // as 08P01, is a bug): one libpq has seen close, or one the server says it is ending
        // (57P01–57P05: terminated, shut down, the database dropped, idle too long). A
        // pipeline's statement hears that error before the connection closes.
        if connectionLost || Self.ending.contains(state) { return .connection }
        switch state {
        case "40001", "40P01": return .retry
        case "57014": return .interrupted
        case "53100": return .full
        case "55P03", "53300": return .busy
        default: return state.hasPrefix("23") ? .constraint : .other
        }
    }

    private static func message(_ text: UnsafePointer<CChar>?) -> String {
        text.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
    }
}
