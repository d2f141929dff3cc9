/// A pooled connection lent to a read that is mostly one statement
/// (``PostgresDatabase/oneStatementSnapshot(_:)``): it runs the first query, alone (a
/// snapshot of its own), and refuses every later statement, and any `execute` (which could
/// change the session: a `SET`, a `BEGIN`), after which the read runs again in a transaction.
final class OneStatementRead: SQLConnection {
    /// What every statement after the first throws, and every `execute`.
    struct NotAlone: Error {}

    private let connection: PostgresConnection
    private var statements = 0

    init(_ connection: PostgresConnection) {
        self.connection = connection
    }

    /// Whether the read ran (or tried) at most one statement.
    var isAlone: Bool { statements <= 1 }

    var dialect: any SQLDialect { connection.dialect }

    func query(_ sql: String, _ arguments: SQLArguments) throws -> PostgresRows {
        try next()
        return try connection.query(sql, arguments)
    }

    func execute(_ sql: String, _ arguments: SQLArguments) throws -> Int {
        statements += 2
        throw NotAlone()
    }

    private func next() throws {
        statements += 1
        if statements > 1 { throw NotAlone() }
    }
}
