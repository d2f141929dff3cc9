/// A connection that runs nothing: what a read asks of it first shows whether the read is
/// the one statement it then returns, to be sent elsewhere (a search's, from an event loop:
/// ``ResourceStore/renderedListOnLoop(_:caller:reactor:isAbandoned:completion:)``). Every
/// statement throws ``Refused``.
struct NoStatements: SQLConnection {
    /// What every statement throws.
    struct Refused: Error {}

    let dialect: any SQLDialect

    func query(_ sql: String, _ arguments: SQLArguments) throws -> PostgresRows { throw Refused() }

    func execute(_ sql: String, _ arguments: SQLArguments) throws -> Int { throw Refused() }
}
