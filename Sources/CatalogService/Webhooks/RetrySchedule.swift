import CatalogStore

/// When a failed delivery is tried again: after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, then
/// every 10 h, each delay ±20% at random (so that receivers that failed together are not
/// all tried again at once), until three days after its first attempt; then it fails.
struct RetrySchedule: Sendable {
    /// The delays, in milliseconds; the last repeats.
    static let delays: [Int64] = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000]
    /// How long a message is tried for, and how long an endpoint may fail before it is disabled.
    static let horizon: Int64 = 3 * 86_400_000
    /// The share of a delay it may move by, either way.
    static let jitter = 0.2

    /// What follows an attempt made at `attemptedAt` that got `status` (a 2xx is success),
    /// the `attempt`th of a delivery first tried at `first`; `random` is in 0..<1.
    static func next(status: Int?, attempt: Int, attemptedAt: Int64, first: Int64, random: Double) -> DeliveryOutcome.Next {
        if let status, (200..<300).contains(status) { return .delivered }
        let base = delays[min(max(attempt, 1), delays.count) - 1]
        let delay = Int64(Double(base) * (1 - jitter + 2 * jitter * random))
        let at = attemptedAt + delay
        return at - first > horizon ? .failed : .retry(at: at)
    }
}
