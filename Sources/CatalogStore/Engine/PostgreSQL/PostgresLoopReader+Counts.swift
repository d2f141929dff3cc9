import Synchronization

extension PostgresLoopReader {
    /// Counts of every loop's reads of one database (``LoopReadCounts``).
    final class Counts: Sendable {
        let taken = Atomic<Int>(0)
        let batches = Atomic<Int>(0)
        let sent = Atomic<Int>(0)
        let resent = Atomic<Int>(0)
        let shared = Atomic<Int>(0)
        let declined = Atomic<Int>(0)
        let handedBack = Atomic<Int>(0)
        let connections = Atomic<Int>(0)
        /// Of the reads taken, declined and handed back, the heavy lane's.
        let heavyTaken = Atomic<Int>(0)
        let heavyDeclined = Atomic<Int>(0)
        let heavyHandedBack = Atomic<Int>(0)

        var snapshot: LoopReadCounts {
            LoopReadCounts(
                taken: taken.load(ordering: .relaxed), batches: batches.load(ordering: .relaxed), sent: sent.load(ordering: .relaxed),
                resent: resent.load(ordering: .relaxed), shared: shared.load(ordering: .relaxed), declined: declined.load(ordering: .relaxed),
                handedBack: handedBack.load(ordering: .relaxed), connections: connections.load(ordering: .relaxed),
                heavy: .init(
                    taken: heavyTaken.load(ordering: .relaxed), declined: heavyDeclined.load(ordering: .relaxed),
                    handedBack: heavyHandedBack.load(ordering: .relaxed)))
        }
    }
}
