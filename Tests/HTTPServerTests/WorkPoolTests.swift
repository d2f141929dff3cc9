import Foundation
import Synchronization
import Testing

@testable import HTTPServer

/// A fair pool runs its callers' jobs in turns and holds each caller to its share.
@Suite struct WorkPoolTests {
    /// Records what ran, in order, and lets the test hold the pool's only thread.
    final class Run: Sendable {
        let order = Mutex<[String]>([])
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)

        func job(_ name: String) -> @Sendable () -> Void {
            {
                self.order.withLock { $0.append(name) }; self.finished.signal()
            }
        }
    }

    @Test func callersTakeTurnsWhateverTheyQueued() throws {
        let pool = WorkPool(name: "fair-test", threads: 1, queueLimit: 16, perCaller: 4)
        let run = Run()
        // The only thread is busy with a job of A's while the others queue.
        #expect(
            pool.submit(for: "A") {
                run.started.signal(); run.gate.wait(); run.order.withLock { $0.append("A0") }; run.finished.signal()
            })
        #expect(run.started.wait(timeout: .now() + 10) == .success)
        for index in 1...3 { #expect(pool.submit(for: "A", run.job("A\(index)"))) }
        #expect(!pool.submit(for: "A", run.job("A4")), "A holds its four, one of them running")
        #expect(pool.submit(for: "B", run.job("B1")))
        #expect(pool.submit(for: "B", run.job("B2")))
        #expect(pool.submit(for: "C", run.job("C1")))
        run.gate.signal()
        for _ in 0..<7 { #expect(run.finished.wait(timeout: .now() + 10) == .success) }
        // A queued first and most, and waited its turn after each of B's and C's first jobs.
        #expect(run.order.withLock { $0 } == ["A0", "A1", "B1", "C1", "A2", "B2", "A3"])
        // A's jobs are done: its share is free again.
        #expect(pool.submit(for: "A", run.job("A5")))
        #expect(run.finished.wait(timeout: .now() + 10) == .success)
    }

    @Test func aLineMayHaveAShareOfItsOwn() {
        let pool = WorkPool(name: "fair-share", threads: 1, queueLimit: 16, perCaller: 1)
        let run = Run()
        #expect(
            pool.submit(for: "A") {
                run.started.signal(); run.gate.wait(); run.finished.signal()
            })
        #expect(run.started.wait(timeout: .now() + 10) == .success)
        #expect(!pool.submit(for: "A", run.job("A1")), "A holds its one")
        #expect(pool.submit(for: "opens A", share: 2, run.job("O1")) && pool.submit(for: "opens A", share: 2, run.job("O2")))
        #expect(!pool.submit(for: "opens A", share: 2, run.job("O3")), "the line's own share of two")
        run.gate.signal()
        for _ in 0..<3 { #expect(run.finished.wait(timeout: .now() + 10) == .success) }
        #expect(run.order.withLock { $0 } == ["O1", "O2"])
    }

    @Test func theWholeQueueIsBounded() {
        let pool = WorkPool(name: "fair-bound", threads: 1, queueLimit: 2, perCaller: 8)
        let run = Run()
        #expect(
            pool.submit(for: "A") {
                run.started.signal(); run.gate.wait(); run.finished.signal()
            })
        #expect(run.started.wait(timeout: .now() + 10) == .success)
        // The running job holds no place in the queue; two more fill it.
        #expect(pool.submit(for: "B", run.job("B1")))
        #expect(pool.submit(for: "C", run.job("C1")))
        #expect(!pool.submit(for: "D", run.job("D1")), "a caller with no jobs yet still finds the queue full")
        run.gate.signal()
        for _ in 0..<3 { #expect(run.finished.wait(timeout: .now() + 10) == .success) }
        #expect(run.order.withLock { $0 } == ["B1", "C1"])
    }
}
