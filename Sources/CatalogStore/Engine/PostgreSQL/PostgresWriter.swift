import Foundation

/// One of PostgreSQL's writers (the engine's part of ``GroupCommit``): a connection of its
/// own, opened when first needed and again after it breaks, whose transactions take the
/// change log's lock first. PostgreSQL orders the writers' transactions (the rows each
/// write checks are locked), and commits that arrive together share a WAL flush.
///
/// A statement that fails outside a savepoint aborts the whole transaction: a failing
/// write of one statement, a serialization failure or a deadlock stop the batch, which
/// then runs again, each write alone; only a lost connection fails it outright. A write
/// alone that meets a serialization failure or a deadlock runs again.
final class PostgresWriter: CommitWriter, @unchecked Sendable {
    /// Writers (and connections) per server by default. Two, each committing what waits in
    /// one transaction, took more durable writes per second than one or eight in
    /// `Benchmarks/postgres.sh` (more writers make smaller groups); every replica adds two.
    static let defaultCount = 2
    /// The most light writes one transaction holds.
    static let maxBatch = 64

    private let connect: @Sendable () throws -> PostgresConnection
    /// Used by the writer's thread only.
    private var connection: PostgresConnection?

    /// A writer that opens its connection with `connect`.
    init(connect: @escaping @Sendable () throws -> PostgresConnection) {
        self.connect = connect
    }

    func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let current = try connection ?? connect()
        connection = current
        defer { if current.isBroken { connection = nil } }
        return try current.inDeferredTransaction(PostgresConnection.beginLockingChangeLog) { try body(current) }
    }

    func savepoint(_ connection: PostgresConnection) throws { try connection.script("SAVEPOINT job") }

    func release(_ connection: PostgresConnection) throws { try connection.script("RELEASE SAVEPOINT job") }

    func rollBack(_ connection: PostgresConnection) throws { try connection.rollBack(toSavepoint: "job") }

    func abortsBatch(_ error: any Error, atomic: Bool) -> Bool {
        guard let error = error as? SQLError else { return false }
        return !atomic || error.kind == .retry || error.kind == .connection
    }

    func rerunsAlone(after error: any Error) -> Bool {
        guard let error = error as? SQLError else { return false }
        return error.kind != .connection
    }

    func isRetryable(_ error: any Error) -> Bool { (error as? SQLError)?.kind == .retry }

    func finish(_ connection: PostgresConnection) throws -> Bool { false }

    func settle() {}

    func didCommit() {}

    /// Closes the connection.
    func finished() { connection = nil }
}
