import Foundation

/// A queued write: what runs it on a connection of the engine (returning what to call
/// once the transaction has committed), and how it fails.
struct WriteJob<Connection> {
    let run: (Connection) throws -> @Sendable () -> Void
    let fail: @Sendable (any Error) -> Void
    /// Whether it may take milliseconds (thousands of rows): it then runs alone.
    let heavy: Bool
    /// Whether it needs a savepoint to be all-or-nothing (several modifying statements).
    let atomic: Bool
    /// Whether nobody waits for the answer any more (``WriteOptions/isAbandoned``).
    let isAbandoned: (@Sendable () -> Bool)?
    /// Whether it is background work (``WriteOptions/background``).
    let background: Bool

    /// The job of `work`, whose result `completion` receives after the commit (or its
    /// failure): where `options` say, else on the writer's thread.
    init<T: Sendable>(
        _ options: WriteOptions, atomic: Bool, heavy: Bool, _ work: @escaping (Connection) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let answer = options.answer ?? { $0() }
        run = { connection in
            let value = try work(connection)
            return { answer { completion(.success(value)) } }
        }
        fail = { error in answer { completion(.failure(error)) } }
        self.heavy = heavy
        self.atomic = atomic || heavy
        isAbandoned = options.isAbandoned
        background = options.background
    }
}
