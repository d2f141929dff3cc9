import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import CatalogService

/// The expensive reads' pool is shared fairly: one caller holds at most its share of it,
/// so its searches never fill the queue for another caller's.
@Suite(.serialized) struct ReadPoolShareTests {
    @Test(arguments: TestEngine.all) func oneCallersSearchesTakeItsShareNotThePool(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: true) { $0.rateLimits = [.expensive: RatePolicy(quota: 1_000, window: 60)] }
            let flooder = try catalog.user("Flooder"), other = try catalog.user("Other")
            let share = ExpensiveReads.pool.perCaller
            #expect(share == 8)
            let search = "/v1/playable-items?q=big"
            let flood = APIClient(inProcess: catalog.application.server, key: flooder.key)
            let second = APIClient(inProcess: catalog.application.server, key: other.key)
            // Both keys known before the pool is held (then nothing waits on the database),
            // and the pool held as briefly as can be: other tests' searches share it.
            let warmed = (try await flood.get(search).status, try await second.get(search).status)
            #expect(warmed == (200, 200))
            // Every thread of the pool is held, so the searches below wait in their lines.
            let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            for _ in 0..<ExpensiveReads.threads {
                #expect(
                    ExpensiveReads.pool.submit(for: "test: holds a thread") {
                        held.signal()
                        release.wait()
                    })
            }
            // Waited for on a thread of its own: never on the tasks' shared threads.
            try await onThread { for _ in 0..<ExpensiveReads.threads { held.wait() } }
            let statuses = Mutex<[Int]>([])
            let refusedOverShare = Task {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<(share + 1) { group.addTask { try await flood.get(search).status } }
                    for try await status in group { statuses.withLock { $0.append(status) } }
                }
            }
            // The one over the share is refused at once, while the others wait (the bound only
            // matters when the whole suite, video processing included, loads the machine).
            let deadline = Date().addingTimeInterval(60)
            while statuses.withLock({ $0.count }) < 1, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(statuses.withLock { $0 } == [503], "the flooder's read past its share")
            // Another caller still gets its turn.
            let waiting = Task { try await second.get(search).status }
            for _ in 0..<ExpensiveReads.threads { release.signal() }
            try await refusedOverShare.value
            #expect(try await waiting.value == 200)
            #expect(statuses.withLock { $0.sorted() } == Array(repeating: 200, count: share) + [503])
        }
    }
}
