import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// `GET /v1/me/changes`: each viewer's own progress, favorites and ratings as they change,
/// on both engines, as pages, long-polls and event streams, bound to the viewer.
@Suite struct ViewerChangesTests {
    @Test(arguments: TestEngine.all) func aViewersChangesAreItsOwnInCommitOrder(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, _) = try ViewerStateTests.viewer(catalog, "Viewer")
            let (other, _) = try ViewerStateTests.viewer(catalog, "Other")
            let items = try await ViewerProgressTests.items(catalog, 2)
            let game = try await catalog.api.games.create(GameInput(name: "Joust", imageName: "joust")).value.id

            let empty = try await viewer.viewer.changes(since: nil)
            #expect(empty.changes.isEmpty && !empty.hasMore)
            let progress = try await viewer.progress.record(ProgressInput(positionSeconds: 100, clientTime: Date(), deviceId: "phone"), for: items[0])
            try await viewer.viewer.addFavorite(.game, game)
            try await viewer.viewer.rate(items[1], .like)
            try await other.viewer.rate(items[0], .dislike)

            let all = try await viewer.viewer.changes(since: nil)
            #expect(all.changes.map(\.kind) == [.progress, .favorite, .rating] && !all.hasMore)
            #expect(all.changes[0].progress == progress.progress && all.changes[0].id == items[0])
            #expect(all.changes[1].favoriteType == .game && all.changes[1].favorite?.id == game && all.changes[2].rating?.rating == .like)
            #expect(try await viewer.viewer.changes(since: all.nextToken).changes.isEmpty)
            let paged = try await viewer.viewer.changes(since: nil, limit: 2)
            #expect(paged.changes.count == 2 && paged.hasMore)
            #expect(try await viewer.viewer.changes(since: paged.nextToken).changes.map(\.kind) == [.rating])

            // A state changed again moves to the end; removals are changes too.
            let moved = try await viewer.progress.record(ProgressInput(positionSeconds: 200, clientTime: Date(), deviceId: "tv"), for: items[0])
            try await viewer.viewer.removeFavorite(.game, game)
            try await catalog.api.playableItems.delete(items[1])
            let since = try await viewer.viewer.changes(since: all.nextToken)
            #expect(since.changes.map(\.kind) == [.progress, .favorite, .rating])
            #expect(since.changes[0].progress == moved.progress)
            #expect(since.changes[1].deleted && since.changes[1].favoriteType == .game && since.changes[1].id == game && since.changes[1].favorite == nil)
            #expect(since.changes[2].deleted && since.changes[2].id == items[1], "the item's deletion took the rating")
            // From the start, the log is a snapshot: what is, and what went.
            #expect(try await viewer.viewer.changes(since: nil).changes.map(\.kind) == [.progress, .favorite, .rating])

            // Tokens are the viewer's own: another viewer's, or the catalog feed's, is a 410.
            let theirs = try await other.viewer.changes(since: nil).nextToken
            await expectProblem(410, "syncTokenExpired") { try await viewer.viewer.changes(since: theirs) }
            let catalogToken = try await catalog.api.changes.page(since: nil).nextToken
            await expectProblem(410, "syncTokenExpired") { try await viewer.viewer.changes(since: catalogToken) }
            await expectProblem(410, "syncTokenExpired") { try await catalog.api.changes.page(since: all.nextToken) }
            // Nobody else's state reaches the catalog's feed, admins included.
            let catalogFeed = try await catalog.api.changes.page(since: nil, limit: 1000)
            #expect(catalogFeed.changes.allSatisfy { ["game", "playableItem"].contains($0.type) })
            let raw = APIClient(baseURL: catalog.client.baseURL, key: nil)
            #expect(try await raw.get("/v1/me/changes").status == 401)
            #expect(try await raw.get("/v1/me/changes?types=progress").status == 401)
            let keyed = APIClient(baseURL: catalog.client.baseURL, key: try catalog.user("Raw").key)
            #expect(try await keyed.get("/v1/me/changes?types=progress").status == 400)
            #expect(try await keyed.get("/v1/me/changes").header("Cache-Control") == "no-store")
        }
    }

    @Test(arguments: TestEngine.all) func anotherAccountsDeletionLeavesTokensGood(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, _) = try ViewerStateTests.viewer(catalog, "Viewer")
            let (leaving, leavingID) = try ViewerStateTests.viewer(catalog, "Leaving")
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            try await viewer.viewer.rate(item, .like)
            try await leaving.viewer.rate(item, .dislike)
            try await leaving.viewer.addFavorite(.playableItem, item)
            // The viewer's token is the log's top: the leaving account's rows, above its own, go.
            let token = try await viewer.viewer.changes(since: nil).nextToken
            #expect(try await catalog.client.send("DELETE", "/v1/users/\(leavingID)").status == 204)
            #expect(try await viewer.viewer.changes(since: token).changes.isEmpty)
            try await viewer.viewer.rate(item, .dislike)
            #expect(try await viewer.viewer.changes(since: token).changes.map(\.kind) == [.rating])
        }
    }

    @Test(arguments: TestEngine.all) func aLongPollWakesOnTheViewersOwnChangeOnly(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, _) = try ViewerStateTests.viewer(catalog, "Viewer")
            let (other, _) = try ViewerStateTests.viewer(catalog, "Other")
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            let start = try await viewer.viewer.changes(since: nil).nextToken
            async let waited = viewer.viewer.changes(since: start, wait: 60)
            try await Task.sleep(for: .milliseconds(300))
            // Someone else's changes and the catalog's do not answer it; the viewer's own does.
            try await other.viewer.rate(item, .like)
            _ = try await ViewerProgressTests.items(catalog, 1)
            try await Task.sleep(for: .milliseconds(300))
            try await viewer.viewer.addFavorite(.playableItem, item)
            let page = try await waited
            #expect(page.changes.map(\.kind) == [.favorite] && page.changes[0].id == item)
        }
    }

    @Test(arguments: TestEngine.all) func eventsFollowTheViewersChangesAndResume(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let user = try catalog.user("Viewer")
            let viewer = CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(user.key), timeout: 10)
            let items = try await ViewerProgressTests.items(catalog, 3)
            let port = try #require(catalog.client.baseURL.port)
            let headers = ["Authorization": "Bearer \(user.key)"]
            let stream = try await onThread { try EventStreamClient(port: port, path: "/v1/me/changes", headers: headers) }
            for item in items { try await viewer.viewer.rate(item, .like) }
            let events = try await onThread { try stream.events(3) }
            #expect(stream.head.hasPrefix("HTTP/1.1 200") && stream.head.lowercased().contains("content-type: text/event-stream"))
            #expect(EventStreamClient.resourceIDs(events) == items.map(\.rawValue))
            let resumeFrom = try #require(events.first?["id"], "\(stream.head)")
            let resumed = try await onThread {
                try EventStreamClient(port: port, path: "/v1/me/changes", headers: headers.merging(["Last-Event-ID": resumeFrom]) { $1 })
            }
            #expect(EventStreamClient.resourceIDs(try await onThread { try resumed.events(2) }) == [items[1].rawValue, items[2].rawValue])
            // Another viewer resuming from this viewer's event id is refused.
            let other = try catalog.user("Other")
            let refused = try await onThread {
                try EventStreamClient(port: port, path: "/v1/me/changes", headers: ["Authorization": "Bearer \(other.key)", "Last-Event-ID": resumeFrom])
            }
            _ = try await onThread { try refused.events(1, timeout: 3) }
            #expect(refused.head.hasPrefix("HTTP/1.1 410"))
        }
    }
}
