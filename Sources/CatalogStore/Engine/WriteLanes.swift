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

    /// The job of `work`, whose result `completion` receives after the commit (or its
    /// failure): where `options` say, else on the writer's thread.
    init<T: Sendable>(_ options: WriteOptions, atomic: Bool, heavy: Bool, _ work: @escaping (Connection) throws -> T,
                      completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        let answer = options.answer ?? { $0() }
        run = { connection in
            let value = try work(connection)
            return { answer { completion(.success(value)) } }
        }
        fail = { error in answer { completion(.failure(error)) } }
        self.heavy = heavy
        self.atomic = atomic || heavy
        isAbandoned = options.isAbandoned
    }
}

/// The queued writes of an engine's writers, in two bounded lanes: light writes (taken in
/// groups) and heavy ones (imports, long orders: taken one at a time, so they never hold
/// up the light ones for long). Past a lane's bound a write is refused at once (503,
/// retry) rather than queued without limit. ``condition`` guards the lanes, and the
/// writers' own state too.
final class WriteLanes<Connection>: @unchecked Sendable {
    /// The most light writes waiting at once.
    static var maxLight: Int { 10_000 }
    /// The most heavy writes waiting at once.
    static var maxHeavy: Int { 64 }

    let condition = NSCondition()
    var light: [WriteJob<Connection>] = []
    var heavy: [WriteJob<Connection>] = []
    /// Set once the store closes: nothing more is queued.
    var stopped = false

    /// Whether nothing waits.
    var isEmpty: Bool { light.isEmpty && heavy.isEmpty }

    /// Queues `job` in its lane and wakes a writer, or fails it at once (closing, or its
    /// lane full).
    func submit(_ job: WriteJob<Connection>) {
        condition.lock()
        let refusal: StoreError? = if stopped {
            .unavailable("The store is shutting down.")
        } else if job.heavy ? heavy.count >= Self.maxHeavy : light.count >= Self.maxLight {
            .unavailable("Too many writes are waiting; retry shortly.")
        } else {
            nil
        }
        if refusal == nil {
            if job.heavy { heavy.append(job) } else { light.append(job) }
            condition.signal()
        }
        condition.unlock()
        if let refusal { job.fail(refusal) }
    }

    /// Takes the oldest light writes, at most `limit` (under ``condition``).
    func takeLight(_ limit: Int) -> [WriteJob<Connection>] {
        let taken = Array(light.prefix(limit))
        light.removeFirst(taken.count)
        return taken
    }
}
