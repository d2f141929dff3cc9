import CatalogStore

/// When a failed delivery is tried again: after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, then
/// every 10 h, each delay ±20% at random (so that receivers that failed together are not
/// all tried again at once), until three days after its first attempt; then it fails.
///
/// Which delay comes next follows the time since the first attempt, not a count of
/// attempts: a delivery an admin retries (whose first attempt is then its retry's) starts
/// the ladder again at 5 s, and one whose attempts came late (a server stopped for an
/// hour) is not then tried every few seconds.
struct RetrySchedule: Sendable {
    /// The delays, in milliseconds; the last repeats.
    static let delays: [Int64] = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000]
    /// How long a message is tried for, and how long an endpoint may fail before it is disabled.
    static let horizon: Int64 = 3 * 86_400_000
    /// The share of a delay it may move by, either way.
    static let jitter = 0.2

    /// When each step of the ladder is reached at the earliest, counted from the first
    /// attempt: the sums of the delays before it, less the jitter's share. (Each sum with
    /// its own jitter is below the next step's threshold, so no step is skipped.)
    static let steps: [Int64] = delays.indices.map { index in
        Int64(Double(delays[..<index].reduce(0, +)) * (1 - jitter))
    }

    /// What follows an attempt made at `attemptedAt` that got `status` (a 2xx is success),
    /// of a delivery first tried at `first`; `random` is in 0..<1.
    static func next(status: Int?, attemptedAt: Int64, first: Int64, random: Double) -> DeliveryOutcome.Next {
        if let status, (200..<300).contains(status) { return .delivered }
        let step = steps.lastIndex { $0 <= attemptedAt - first } ?? 0
        let delay = Int64(Double(delays[step]) * (1 - jitter + 2 * jitter * random))
        let at = attemptedAt + delay
        return at - first > horizon ? .failed : .retry(at: at)
    }
}
