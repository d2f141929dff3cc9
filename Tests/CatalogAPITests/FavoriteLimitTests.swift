import CatalogClient
import CatalogModels
import Foundation
import ServiceTestSupport
import Testing

@testable import CatalogStore

/// The most favorites a viewer keeps: the 10,000th is taken, the next refused until one goes.
@Suite struct FavoriteLimitTests {
    @Test(arguments: TestEngine.all) func aViewerKeepsAtMostTenThousandFavorites(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, viewerID) = try ViewerStateTests.viewer(catalog, "Collector")
            let items = try await ViewerProgressTests.items(catalog, 3)
            // All but one of the limit written straight in (favorites of items that are not
            // there: what is counted is the viewer's rows), then the rest through the API.
            _ = try catalog.application.store.database.write { db in
                try db.execute(
                    """
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < CAST(? AS INTEGER))
                    INSERT INTO viewer_favorites (user_id, resource_type, resource_id, favorited_at) SELECT ?, 'game', 'placeholder-' || i, i FROM n
                    """, [FavoriteRules.maxPerViewer - 1, viewerID.rawValue])
            }
            try await viewer.viewer.addFavorite(.playableItem, items[0])
            let problem = await expectProblem(409) { try await viewer.viewer.addFavorite(.playableItem, items[1]) }
            #expect(problem?.code == "quotaExceeded")
            try await viewer.viewer.addFavorite(.playableItem, items[0])  // one it has: still fine
            try await viewer.viewer.removeFavorite(.playableItem, items[0])
            try await viewer.viewer.addFavorite(.playableItem, items[1])
            await expectProblem(409) { try await viewer.viewer.addFavorite(.playableItem, items[2]) }
        }
    }
}
