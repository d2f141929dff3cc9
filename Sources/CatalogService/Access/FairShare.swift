import Synchronization

/// How many jobs of a shared pool one caller may have queued or running at once: its
/// share, so that one caller's burst cannot fill the queue every other caller waits in.
final class FairShare: Sendable {
    /// The most jobs one caller holds.
    let perCaller: Int
    private let held = Mutex<[String: Int]>([:])

    init(perCaller: Int) {
        self.perCaller = perCaller
    }

    /// Takes a place for `partition` (``RateLimiter/partition(_:_:)``); false when it holds its share.
    func acquire(_ partition: String) -> Bool {
        held.withLock { held in
            let count = held[partition, default: 0]
            guard count < perCaller else { return false }
            held[partition] = count + 1
            return true
        }
    }

    /// Gives back a place taken by ``acquire(_:)``.
    func release(_ partition: String) {
        held.withLock { held in
            if let count = held[partition], count > 1 { held[partition] = count - 1 } else { held[partition] = nil }
        }
    }
}
