import CatalogModels
import Foundation
import ServiceTestSupport
import Testing

@testable import CatalogStore

/// The batches that add up likes and views: a backlog larger than a batch is applied whole
/// in one pass, on both engines.
@Suite struct CountBatchTests {
    @Test(arguments: TestEngine.all) func aBacklogOfSeveralBatchesIsAppliedInOnePass(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            let store = catalog.application.store
            let waiting = ViewCounter.batchSize * 2 + 500
            // Written as the tables' triggers write them, in one transaction.
            _ = try store.database.write { db in
                try db.execute(
                    """
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < CAST(? AS INTEGER))
                    INSERT INTO item_count_deltas (item_id, likes, views) SELECT ?, 0, 1 FROM n
                    """, [waiting, item.rawValue])
            }
            // (The server's own batches may take part of it first.)
            try catalog.application.applyCounts()
            #expect(try await catalog.api.playableItems.get(item).value.viewCount == waiting)
            #expect(try catalog.application.applyCounts().isEmpty)
        }
    }
}
