import CatalogClient
import CatalogIdentity
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// Favorites, ratings, views and what they add up to, on both engines: each viewer's own,
/// counted exactly once the batches are applied, and an item's counts never a new version.
@Suite struct ViewerStateTests {
    static func viewer(_ catalog: TestCatalog, _ name: String) throws -> (CatalogClient, CatalogID) {
        try ViewerProgressTests.viewer(catalog, name)
    }

    @Test(arguments: TestEngine.all) func favoritesAreEachViewersOwnNewestFirstAndFollowWhatTheyMaySee(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, viewerID) = try Self.viewer(catalog, "Viewer")
            let (owner, _) = try Self.viewer(catalog, "Owner")
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            let game = try await catalog.api.games.create(GameInput(name: "Joust", imageName: "joust")).value.id
            let shared = try await owner.playlists.create(PlaylistInput(title: "Shared")).value.id
            let secret = try await owner.playlists.create(PlaylistInput(title: "Secret", visibility: .private)).value.id
            let raw = APIClient(baseURL: catalog.client.baseURL, key: try catalog.user("Raw").key)

            #expect(try await raw.send("PUT", "/v1/me/favorites/playable-items/\(item)").status == 201)
            #expect(try await raw.send("PUT", "/v1/me/favorites/playable-items/\(item)").status == 204, "again is harmless")
            #expect(try await raw.send("PUT", "/v1/me/favorites/songs/\(item)").status == 400)
            #expect(try await raw.send("PUT", "/v1/me/favorites/games/\(item)").status == 404, "an item's id is no game")
            #expect(try await raw.send("PUT", "/v1/me/favorites/playlists/\(secret)").status == 404, "a playlist hidden from the caller")
            #expect(try await raw.send("DELETE", "/v1/me/favorites/games/\(game)").status == 404)
            #expect(try await raw.get("/v1/me/favorites?type=songs").status == 400)

            for (type, id) in [(FavoriteType.playableItem, item), (.game, game), (.playlist, shared)] {
                try await viewer.viewer.addFavorite(type, id)
                try await Task.sleep(for: .milliseconds(5))
            }
            let all = try await viewer.viewer.favorites()
            #expect(all.items.map(\.id) == [shared, game, item] && all.nextCursor == nil)
            #expect(all.items[0].playlist?.title == "Shared" && all.items[1].game?.name == "Joust" && all.items[2].playableItem?.title == "Film 0")
            #expect(all.items[1].playableItem == nil && all.items[1].playlist == nil)
            #expect(try await viewer.viewer.favorites(.game).items.map(\.id) == [game])
            var paged: [CatalogID] = []
            var cursor: String?
            repeat {
                let page = try await viewer.viewer.favorites(limit: 2, cursor: cursor)
                paged += page.items.map(\.id)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(paged == [shared, game, item])
            #expect(try await owner.viewer.favorites().items.isEmpty, "nobody sees another's")
            let answer = try await raw.get("/v1/me/favorites")
            #expect(answer.header("Cache-Control")?.contains("private") == true && answer.header("Vary")?.contains("Authorization") == true)

            // A playlist made private since is left out (its owner still sees theirs); a
            // deleted game takes its favorites with it.
            _ = try await owner.playlists.patch(shared, MergePatch().set("visibility", "private"))
            #expect(try await viewer.viewer.favorites().items.map(\.id) == [game, item])
            try await catalog.api.games.delete(game)
            #expect(try await viewer.viewer.favorites().items.map(\.id) == [item])
            try await viewer.viewer.removeFavorite(.playableItem, item)
            #expect(try await viewer.viewer.favorites().items.isEmpty)
            // The account takes the rest.
            try await viewer.viewer.addFavorite(.playableItem, item)
            #expect(try await catalog.client.send("DELETE", "/v1/users/\(viewerID)").status == 204)
            let left = try catalog.application.store.favorites.page(user: viewerID, type: nil, viewer: .everything, limit: 10, cursor: nil)
            #expect(String(decoding: left, as: UTF8.self) == #"{"items":[]}"#)
        }
    }

    @Test(arguments: TestEngine.all) func likesAddUpWithoutANewVersionOrAChange(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            var viewers: [(CatalogClient, CatalogID)] = []
            for index in 0..<4 { viewers.append(try Self.viewer(catalog, "Fan \(index)")) }
            let before = try await catalog.client.get("/v1/playable-items/\(item)")
            let changesBefore = try await catalog.api.changes.page(since: nil).changes.count

            #expect(try await viewers[0].0.viewer.rating(item).rating == .none)
            for (index, (client, _)) in viewers.enumerated() {
                let rating = try await client.viewer.rate(item, index == 3 ? .dislike : .like)
                #expect(rating.rating == (index == 3 ? .dislike : .like) && rating.ratedAt != nil)
            }
            try await viewers[1].0.viewer.rate(item, .like)
            // Applied now (the server's own batch may have come first).
            try catalog.application.applyCounts()
            let counted = try await catalog.api.playableItems.get(item).value
            #expect(counted.likeCount == 3 && counted.viewCount == 0 && counted.version == 1)
            // The document changed, so its tag did; its version did not, and nothing was logged.
            let after = try await catalog.client.get("/v1/playable-items/\(item)", headers: ["If-None-Match": try #require(before.header("ETag"))])
            #expect(after.status == 200 && after.header("ETag") != before.header("ETag"))
            #expect(try await catalog.api.changes.page(since: nil).changes.count == changesBefore)
            // Lists show the new counts too.
            #expect(try await catalog.api.playableItems.list().items.first?.likeCount == 3)

            // Taking a like back, turning one into a dislike, and deleting a fan's account.
            #expect(try await viewers[0].0.viewer.rate(item, .none) == ItemRating(playableItemId: item, rating: .none))
            try await viewers[1].0.viewer.rate(item, .dislike)
            try await viewers[3].0.viewer.rate(item, .like)
            #expect(try await catalog.client.send("DELETE", "/v1/users/\(viewers[2].1)").status == 204)
            try catalog.application.applyCounts()
            #expect(try await catalog.api.playableItems.get(item).value.likeCount == 1)
            #expect(try catalog.application.applyCounts().isEmpty, "every delta is applied once")
            await expectProblem(404) { try await viewers[0].0.viewer.rate(CatalogID(), .like) }
            let raw = APIClient(baseURL: catalog.client.baseURL, key: try catalog.user("Raw").key)
            #expect(try await raw.send("PUT", "/v1/me/ratings/\(item)", json: ["rating": "love"]).status == 422)
        }
    }

    @Test(arguments: TestEngine.all) func aDeletedItemsCountsNeverReachItsSuccessor(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            var fans: [CatalogClient] = []
            for index in 0..<3 { fans.append(try Self.viewer(catalog, "Fan \(index)").0) }
            for fan in fans.prefix(2) { try await fan.viewer.rate(item, .like) }
            try catalog.application.applyCounts()
            let counted = try await catalog.api.playableItems.get(item).value
            #expect(counted.likeCount == 2)
            // A like still waiting, then the item deleted and imported again from its export.
            try await fans[2].viewer.rate(item, .like)
            try await catalog.api.playableItems.delete(item)
            let record: [String: Any] = [
                "id": item.rawValue, "title": counted.title, "streamURL": counted.streamURL.absoluteString, "likeCount": 2, "viewCount": 5,
                "createdAt": "2026-11-01T10:00:00.000Z", "updatedAt": "2026-11-01T10:00:00.000Z", "version": 1,
            ]
            let imported = try await catalog.client.send("POST", "/admin/import", json: ["records": [["type": "playableItem", "data": record]]])
            #expect(imported.status == 200)
            try catalog.application.applyCounts()
            let successor = try await catalog.api.playableItems.get(item).value
            #expect(successor.likeCount == 2 && successor.viewCount == 5, "the export's counts, and nothing of the deleted item's")
        }
    }

    @Test func viewDigestsAreHMACs() {
        // RFC 4231, test case 2.
        let digest = Crypto.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
        #expect(Crypto.hex(digest) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let long = Crypto.hmacSHA256(key: [UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
        #expect(Crypto.hex(long) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test(arguments: TestEngine.all) func aViewCountsOncePerViewerOrSessionADay(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            let short = try await ViewerProgressTests.items(catalog, 1, duration: 40)[0]
            let anonymous = CatalogClient(baseURL: catalog.client.baseURL, timeout: 10)

            #expect(try await !anonymous.viewer.reportView(ViewInput(sessionId: "a", positionSeconds: 10), of: item), "not played long enough")
            #expect(try await anonymous.viewer.reportView(ViewInput(sessionId: "a", positionSeconds: 31), of: item))
            #expect(try await !anonymous.viewer.reportView(ViewInput(sessionId: "a", positionSeconds: 300), of: item), "once a day")
            #expect(try await anonymous.viewer.reportView(ViewInput(sessionId: "b", positionSeconds: 31), of: item))
            // Half of a 40-second item is enough; the item's running time comes before the player's.
            #expect(try await anonymous.viewer.reportView(ViewInput(sessionId: "a", positionSeconds: 20, durationSeconds: 4000), of: short))

            // A signed-in viewer counts once whatever its sessions; many viewers at once count exactly.
            let (fan, _) = try Self.viewer(catalog, "Fan")
            #expect(try await fan.viewer.reportView(ViewInput(sessionId: "phone", positionSeconds: 40), of: item))
            #expect(try await !fan.viewer.reportView(ViewInput(sessionId: "tablet", positionSeconds: 40), of: item))
            var fans: [CatalogClient] = []
            for index in 0..<40 { fans.append(try Self.viewer(catalog, "Crowd \(index)").0) }
            let counted = try await withThrowingTaskGroup(of: Int.self) { group in
                for client in fans {
                    group.addTask {
                        // Each reports three times at once: one counts.
                        var counted = 0
                        for position in [35.0, 36, 37] where try await client.viewer.reportView(ViewInput(sessionId: "s", positionSeconds: position), of: item) {
                            counted += 1
                        }
                        return counted
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(counted == 40)
            // At most 20 anonymous sessions of one address count a view of one item a day.
            var sessions = 0
            for index in 0..<30 where try await anonymous.viewer.reportView(ViewInput(sessionId: "many-\(index)", positionSeconds: 31), of: item) {
                sessions += 1
            }
            #expect(sessions == ViewRules.sessionsPerAddress - 2)

            // The server's batches apply them within a few seconds, without being asked.
            let expected = 2 + 1 + 40 + sessions
            let deadline = Date(timeIntervalSinceNow: 20)
            var seen = 0
            while Date() < deadline {
                seen = try await catalog.api.playableItems.get(item).value.viewCount
                if seen == expected { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(seen == expected)
            #expect(try await catalog.api.playableItems.get(short).value.viewCount == 1)
            #expect(try await catalog.client.send("POST", "/v1/playable-items/\(CatalogID())/views", json: ["sessionId": "s", "positionSeconds": 40]).status == 404)
            #expect(try await catalog.client.send("POST", "/v1/playable-items/\(item)/views", json: ["sessionId": "", "positionSeconds": 40]).status == 422)
        }
    }

    @Test(arguments: TestEngine.all) func viewerStateIsTheCallersOwnAndPrivate(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await ViewerProgressTests.items(catalog, 1)[0]
            let (viewer, _) = try Self.viewer(catalog, "Viewer")
            let (other, _) = try Self.viewer(catalog, "Other")
            let progress = try await viewer.progress.record(
                ProgressInput(positionSeconds: 100, clientTime: Date(timeIntervalSinceNow: -60), deviceId: "phone"), for: item
            ).progress
            try await viewer.viewer.addFavorite(.playableItem, item)
            try await viewer.viewer.rate(item, .like)

            let mine = try await viewer.playableItems.get(item, include: ["viewerState"]).value
            #expect(mine.viewerState == ViewerState(progress: progress, favorite: true, rating: .like))
            let theirs = try await other.playableItems.get(item, include: ["viewerState"]).value
            #expect(theirs.viewerState == ViewerState(favorite: false, rating: .none))
            let raw = APIClient(baseURL: catalog.client.baseURL, key: try catalog.user("Raw").key)
            let answer = try await raw.get("/v1/playable-items/\(item)?include=viewerState")
            #expect(answer.header("Cache-Control")?.contains("private") == true && answer.header("Vary")?.contains("Authorization") == true)
            let anonymous = APIClient(baseURL: catalog.client.baseURL, key: nil)
            #expect(try await anonymous.get("/v1/playable-items/\(item)?include=viewerState").status == 401)
            #expect(try await anonymous.get("/v1/playable-items/\(item)").status == 200)
        }
    }
}

/// "Up next" and the export of everything held about a viewer.
@Suite struct ViewerUpNextAndExportTests {
    static func finish(_ viewer: CatalogClient, _ item: CatalogID, at time: Date) async throws {
        _ = try await viewer.progress.record(ProgressInput(positionSeconds: 590, clientTime: time, deviceId: "tv"), for: item)
    }

    @Test(arguments: TestEngine.all) func upNextIsTheEntryAfterTheLastFinishedInEachPlaylistBeingWatched(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, _) = try ViewerStateTests.viewer(catalog, "Viewer")
            let (curator, _) = try ViewerStateTests.viewer(catalog, "Curator")
            let items = try await ViewerProgressTests.items(catalog, 6)
            // The viewer's own playlist, a favorite of someone else's, and one it merely watched items of.
            let mine = try await viewer.playlists.create(PlaylistInput(title: "Mine")).value.id
            _ = try await viewer.entries(of: mine).replace(with: [items[0], items[1], items[2]])
            let theirs = try await curator.playlists.create(PlaylistInput(title: "Theirs")).value.id
            _ = try await curator.entries(of: theirs).replace(with: [items[3], items[4], items[0]])
            let unrelated = try await curator.playlists.create(PlaylistInput(title: "Unrelated")).value.id
            _ = try await curator.entries(of: unrelated).replace(with: [items[5], items[1]])
            try await viewer.viewer.addFavorite(.playlist, theirs)
            #expect(try await viewer.progress.upNext().isEmpty, "nothing finished yet")

            let start = Date(timeIntervalSinceNow: -3600)
            try await Self.finish(viewer, items[3], at: start)
            try await Self.finish(viewer, items[0], at: start + 60)
            try await Self.finish(viewer, items[5], at: start + 120)
            // Mine: finished 0, next is 1. Theirs: 0 (the last entry) was finished after 3, so
            // it is finished to the end and left out... until the viewer finishes 3 again later.
            var upNext = try await viewer.progress.upNext()
            #expect(upNext.map(\.playlist.id) == [mine])
            #expect(upNext.first?.next.playableItem.id == items[1] && upNext.first?.next.position == 1)
            try await Self.finish(viewer, items[3], at: start + 180)
            upNext = try await viewer.progress.upNext()
            #expect(upNext.map(\.playlist.id) == [theirs, mine])
            #expect(upNext.first?.next.playableItem.id == items[4])
            #expect(abs((upNext.first?.watchedAt ?? .distantPast).timeIntervalSince(start + 180)) < 0.002, "kept to the millisecond")
            #expect(try await viewer.progress.upNext(limit: 1).map(\.playlist.id) == [theirs])
            // A favorite playlist made private since is not the viewer's to go through any more.
            _ = try await curator.playlists.patch(theirs, MergePatch().set("visibility", "private"))
            #expect(try await viewer.progress.upNext().map(\.playlist.id) == [mine])
            #expect(try await curator.progress.upNext().isEmpty, "nobody else's")
        }
    }

    @Test(arguments: TestEngine.all) func theExportHoldsEverythingAboutTheCallerAndNothingElse(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, viewerID) = try ViewerStateTests.viewer(catalog, "Viewer")
            let (other, _) = try ViewerStateTests.viewer(catalog, "Other")
            let items = try await ViewerProgressTests.items(catalog, 2)
            let playlist = try await viewer.playlists.create(PlaylistInput(title: "Mine")).value.id
            _ = try await viewer.entries(of: playlist).replace(with: [items[0], items[1]])
            let comment = try await viewer.comments.post(on: items[0], CommentInput(body: "Lovely")).value.id
            let secret = try await viewer.apiKeys.create(APIKeyInput(name: "script")).secret
            _ = try await viewer.progress.record(ProgressInput(positionSeconds: 100, clientTime: Date(), deviceId: "phone"), for: items[0])
            try await viewer.viewer.addFavorite(.playableItem, items[1])
            try await viewer.viewer.rate(items[0], .like)
            #expect(try await viewer.viewer.reportView(ViewInput(sessionId: "s", positionSeconds: 40), of: items[0]))
            // The other viewer's state must not appear.
            try await other.viewer.rate(items[1], .dislike)
            _ = try await other.progress.record(ProgressInput(positionSeconds: 5, clientTime: Date(), deviceId: "x"), for: items[1])

            let raw = APIClient(baseURL: catalog.client.baseURL, key: try catalog.user("Raw").key)
            let answer = try await raw.get("/v1/me/export")
            #expect(answer.header("Content-Type") == "application/x-ndjson" && answer.header("Cache-Control") == "no-store")
            let text = String(decoding: try await viewer.viewer.export(), as: UTF8.self)
            #expect(!text.contains(secret), "no secret")
            let lines = try text.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            let types = lines.compactMap { $0["type"] as? String }
            #expect(types == ["user", "apiKey", "apiKey", "comment", "playlist", "playlistEntry", "playlistEntry", "progress", "favorite", "rating", "view"])
            func data(_ type: String) -> [[String: Any]] { lines.filter { $0["type"] as? String == type }.compactMap { $0["data"] as? [String: Any] } }
            #expect(data("user").first?["id"] as? String == viewerID.rawValue)
            #expect(data("comment").first?["id"] as? String == comment.rawValue)
            #expect(data("playlist").first?["id"] as? String == playlist.rawValue)
            #expect(data("progress").first?["positionSeconds"] as? Double == 100)
            #expect(data("favorite").first?["id"] as? String == items[1].rawValue)
            #expect(data("rating").first?["rating"] as? String == "like")
            #expect(data("view").first?["playableItemId"] as? String == items[0].rawValue)
            for key in data("apiKey") { #expect(key["userId"] as? String == viewerID.rawValue) }
        }
    }
}
