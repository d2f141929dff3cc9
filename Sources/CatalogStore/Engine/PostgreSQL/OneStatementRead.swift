/// A pooled connection lent to a read that is mostly one statement
/// (``PostgresDatabase/snapshotOfMostlyOneStatement(_:)``): it runs the first statement,
/// alone (a snapshot of its own), and refuses every later one, after which the read runs
/// again in a transaction.
final class OneStatementRead: SQLConnection {
    /// What a second statement throws.
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
        try next()
        return try connection.execute(sql, arguments)
    }

    private func next() throws {
        statements += 1
        if statements > 1 { throw NotAlone() }
    }
}
