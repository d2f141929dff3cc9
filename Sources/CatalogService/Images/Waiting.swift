import Foundation
import Synchronization

/// What `start` hands its completion (a write's answer), waited for on this thread: for
/// work that blocks anyway (the sweep, the demo's pictures at first start), never a loop.
func waitForCompletion<T: Sendable>(_ start: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let outcome = Mutex<Result<T, any Error>?>(nil)
    start { result in
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    guard let result = outcome.withLock({ $0 }) else { preconditionFailure("a completion ran without a result") }
    return try result.get()
}
