import Synchronization

/// Tells whoever listens that writes have committed, so that waiting for new changes
/// needs no polling: a writer fires it after each commit, and on PostgreSQL a listener
/// fires it for every commit any replica makes to the change log (`NOTIFY`).
/// Observers run on the firing thread and must only hand the news on (set a flag, wake a thread).
public final class CommitSignal: Sendable {
    private let observers = Mutex<[@Sendable () -> Void]>([])

    init() {}

    /// Calls `observer` after every commit from now on.
    public func observe(_ observer: @escaping @Sendable () -> Void) {
        observers.withLock { $0.append(observer) }
    }

    func fire() {
        let current = observers.withLock { $0 }
        for observer in current { observer() }
    }
}
