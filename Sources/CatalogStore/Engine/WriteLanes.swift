/// The queued writes of an engine's writer, in two bounded lanes: light writes (taken in
/// groups) and heavy ones (imports, long orders: taken one at a time, so they never hold
/// up the light ones for long). Past a lane's bound a write is refused at once (503,
/// retry) rather than queued without limit. Guarded by its writer's lock.
struct WriteLanes<Job> {
    /// The most light writes waiting at once.
    static var maxLight: Int { 10_000 }
    /// The most heavy writes waiting at once.
    static var maxHeavy: Int { 64 }

    var light: [Job] = []
    var heavy: [Job] = []
    /// Set once the store closes: nothing more is queued.
    var stopped = false

    /// Whether nothing waits.
    var isEmpty: Bool { light.isEmpty && heavy.isEmpty }

    /// Queues `job` in its lane; the reason it cannot wait when it cannot.
    mutating func admit(_ job: Job, heavy isHeavy: Bool) -> StoreError? {
        if stopped { return .unavailable("The store is shutting down.") }
        guard isHeavy ? heavy.count < Self.maxHeavy : light.count < Self.maxLight else {
            return .unavailable("Too many writes are waiting; retry shortly.")
        }
        if isHeavy { heavy.append(job) } else { light.append(job) }
        return nil
    }

    /// Takes the oldest light writes, at most `limit`.
    mutating func takeLight(_ limit: Int) -> [Job] {
        let taken = Array(light.prefix(limit))
        light.removeFirst(taken.count)
        return taken
    }
}
