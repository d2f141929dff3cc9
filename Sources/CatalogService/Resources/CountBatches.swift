import CatalogStore
import Foundation
import Logging
import Synchronization

/// Adds every viewer's likes and views to the items' counts (``ViewCounter/apply(batches:)``)
/// every ``interval``, on a Dispatch thread (never an event loop): counts lag at most
/// about that long behind the ratings and views that make them.
final class CountBatches: Sendable {
    /// How often the waiting deltas are applied.
    static let interval: Duration = .seconds(2)
    private let counter: ViewCounter
    private let timer = Mutex<(any DispatchSourceTimer)?>(nil)
    /// Where batches run, one at a time.
    private let queue = DispatchQueue(label: "catalog.counts", qos: .utility)
    private let logger = Logger(label: "catalog.counts")

    init(counter: ViewCounter) {
        self.counter = counter
    }

    /// Starts applying every ``interval`` (once; again does nothing).
    func start() {
        timer.withLock { timer in
            guard timer == nil else { return }
            let source = DispatchSource.makeTimerSource(queue: queue)
            let period = DispatchTimeInterval.milliseconds(Int(Self.interval.components.seconds * 1000))
            source.schedule(deadline: .now() + period, repeating: period, leeway: .milliseconds(100))
            source.setEventHandler { [counter, logger] in
                do { try counter.apply() } catch { logger.warning("Adding up likes and views failed: \(error)") }
            }
            source.resume()
            timer = source
        }
    }

    /// Stops, once a batch under way has finished (the database may close after).
    func stop() {
        timer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
        queue.sync {}
    }
}
