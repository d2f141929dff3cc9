import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// Each viewer's progress (`/v1/me/progress/{id}`) and "Continue watching", on both engines:
/// the latest playback wins whatever order heartbeats arrive in, plays are counted once, and
/// nobody sees another's.
@Suite struct ViewerProgressTests {
    static func heartbeat(_ seconds: Double, at time: Date, device: String = "phone", duration: Double? = nil, played: Bool? = nil) -> ProgressInput {
        ProgressInput(positionSeconds: seconds, durationSeconds: duration, clientTime: time, deviceId: device, played: played)
    }

    /// A viewer's client and some items of `duration` seconds.
    static func viewer(_ catalog: TestCatalog, _ name: String = "Viewer") throws -> (CatalogClient, CatalogID) {
        let user = try catalog.user(name)
        return (CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(user.key), timeout: 10), user.id)
    }

    static func items(_ catalog: TestCatalog, _ count: Int, duration: Double? = 600) async throws -> [CatalogID] {
        var ids: [CatalogID] = []
        for index in 0..<count {
            let input = PlayableItemInput(title: "Film \(index)", streamURL: URL(string: "https://example.com/\(index).m3u8")!, durationSeconds: duration)
            ids.append(try await catalog.api.playableItems.create(input).value.id)
        }
        return ids
    }

    @Test(arguments: TestEngine.all) func theLatestPlaybackWinsAndPlaysAreCountedOnce(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, _) = try Self.viewer(catalog)
            let item = try await Self.items(catalog, 1)[0]
            let start = Date(timeIntervalSinceNow: -3600)
            #expect(try await viewer.progress.get(item) == nil)

            let first = try await viewer.progress.record(Self.heartbeat(120, at: start), for: item)
            #expect(first.applied && first.progress.positionSeconds == 120 && first.progress.durationSeconds == 600, "the item's own running time")
            #expect(first.progress.version == 1 && !first.progress.played && first.progress.playCount == 0)
            // The tablet's heartbeat from earlier arrives late: it changes nothing, and says so.
            let late = try await viewer.progress.record(Self.heartbeat(30, at: start - 60, device: "tablet"), for: item)
            #expect(!late.applied && late.progress == first.progress)
            // The same heartbeat twice changes nothing either.
            #expect(try await viewer.progress.record(Self.heartbeat(120, at: start), for: item).progress == first.progress)
            // Finishing on the tablet later: played, counted once.
            let finished = try await viewer.progress.record(Self.heartbeat(560, at: start + 600, device: "tablet"), for: item)
            #expect(finished.progress.played && finished.progress.playCount == 1 && finished.progress.deviceId == "tablet")
            #expect(try await viewer.progress.record(Self.heartbeat(590, at: start + 620, device: "tablet"), for: item).progress.playCount == 1)
            // Rewatching from the start begins it again; finishing again counts a second play.
            let again = try await viewer.progress.record(Self.heartbeat(10, at: start + 1200), for: item)
            #expect(again.applied && !again.progress.played && again.progress.playCount == 1)
            let twice = try await viewer.progress.record(Self.heartbeat(40, at: start + 1300, played: true), for: item)
            #expect(twice.progress.played && twice.progress.playCount == 2)
            // A clock in the future cannot pin a position there.
            let future = try await viewer.progress.record(Self.heartbeat(50, at: Date(timeIntervalSinceNow: 86_400)), for: item)
            #expect(future.applied && future.progress.watchedAt <= Date())
            #expect(try await viewer.progress.get(item) == future.progress)
            // A playback before the clamped one is older, however long the requests took.
            #expect(try await viewer.progress.record(Self.heartbeat(60, at: future.progress.watchedAt - 5), for: item).applied == false)
        }
    }

    @Test(arguments: TestEngine.all) func continueWatchingListsWhatIsBegunNewestFirstPageByPage(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, viewerID) = try Self.viewer(catalog)
            let (other, _) = try Self.viewer(catalog, "Other")
            let items = try await Self.items(catalog, 6)
            let noDuration = try await Self.items(catalog, 1, duration: nil)[0]
            let start = Date(timeIntervalSinceNow: -7200)
            // Begun (5%…90%): items 0, 1, 2 and 5; barely begun (under 5%): 3; finished: 4.
            for (index, seconds) in [(0, 100.0), (1, 200.0), (2, 300.0), (3, 10.0), (4, 580.0), (5, 50.0)] {
                _ = try await viewer.progress.record(Self.heartbeat(seconds, at: start + Double(index) * 60), for: items[index])
            }
            // Without a running time: begun after 30 seconds.
            _ = try await viewer.progress.record(Self.heartbeat(45, at: start + 600), for: noDuration)
            _ = try await other.progress.record(Self.heartbeat(100, at: start), for: items[3])

            let expected = [noDuration, items[5], items[2], items[1], items[0]]
            let all = try await viewer.progress.continueWatching()
            #expect(all.items.map(\.playableItem.id) == expected && all.nextCursor == nil)
            #expect(all.items[1].progress.positionSeconds == 50 && all.items[1].playableItem.title == "Film 5")
            var paged: [CatalogID] = []
            var cursor: String?
            repeat {
                let page = try await viewer.progress.continueWatching(limit: 2, cursor: cursor)
                paged += page.items.map(\.playableItem.id)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(paged == expected)
            // Nobody sees another's: the other viewer's row is its own.
            #expect(try await other.progress.continueWatching().items.map(\.playableItem.id) == [items[3]])
            #expect(try await other.progress.get(items[0]) == nil)

            // Forgetting one, deleting an item, and deleting the account take their rows.
            try await viewer.progress.forget(items[5])
            try await catalog.api.playableItems.delete(items[2])
            #expect(try await viewer.progress.continueWatching().items.map(\.playableItem.id) == [noDuration, items[1], items[0]])
            await expectProblem(404) { try await viewer.progress.forget(items[5]) }
            #expect(try await catalog.client.send("DELETE", "/v1/users/\(viewerID)").status == 204)
            #expect(try catalog.application.store.progress.progress(user: viewerID, item: items[0]) == nil)
        }
    }

    @Test(arguments: TestEngine.all) func heartbeatsSentAtOnceEndAsTheRuleSays(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let (viewer, _) = try Self.viewer(catalog)
            let item = try await Self.items(catalog, 1)[0]
            // Whole seconds: the wire carries milliseconds.
            let base = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 1000).rounded(.down))
            let heartbeats = (0..<24).map { index in
                Self.heartbeat(Double(index * 10), at: base + Double((index * 7) % 24), device: "device-\(index % 3)")
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for heartbeat in heartbeats { group.addTask { _ = try await viewer.progress.record(heartbeat, for: item) } }
                try await group.waitForAll()
            }
            // What the rule makes of them in any one order is where the server must be.
            var expected: PlaybackProgress?
            for heartbeat in heartbeats {
                expected = ProgressRules.apply(heartbeat, receivedAt: Date(), to: expected, item: item, itemDuration: 600).progress
            }
            let stored = try #require(try await viewer.progress.get(item))
            #expect(stored.positionSeconds == expected?.positionSeconds && stored.deviceId == expected?.deviceId && stored.watchedAt == expected?.watchedAt)
        }
    }

    @Test func heartbeatsAreCheckedAsBodiesAre() async throws {
        let catalog = try TestCatalog(seed: false)
        let (viewer, _) = try Self.viewer(catalog)
        let item = try await Self.items(catalog, 1)[0]
        let client = APIClient(baseURL: catalog.client.baseURL, key: try catalog.user("Raw").key)
        let path = "/v1/me/progress/\(item)"
        for (body, pointer) in [
            (["positionSeconds": -1, "clientTime": "2026-11-01T10:00:00.000Z", "deviceId": "d"] as [String: Any], "/positionSeconds"),
            (["positionSeconds": 1, "clientTime": "yesterday", "deviceId": "d"], "/clientTime"),
            (["positionSeconds": 1, "clientTime": "2026-11-01T10:00:00.000Z", "deviceId": ""], "/deviceId"),
            (["positionSeconds": 1, "clientTime": "2026-11-01T10:00:00.000Z", "deviceId": "d", "userId": "someone"], "/userId"),
            (["clientTime": "2026-11-01T10:00:00.000Z", "deviceId": "d"], "/positionSeconds"),
        ] {
            let answer = try await client.send("PUT", path, json: body)
            #expect(answer.status == 422 && answer.problem?.errors?.map(\.pointer) == [pointer], "\(answer.text)")
        }
        let unknown = try await client.send("PUT", "/v1/me/progress/\(CatalogID())", json: ["positionSeconds": 1, "clientTime": "2026-11-01T10:00:00.000Z", "deviceId": "d"])
        #expect(unknown.status == 404)
        #expect(try await client.send("PUT", "/v1/me/progress/nope", json: [:]).status == 400)
        let anonymous = APIClient(baseURL: catalog.client.baseURL)
        #expect(try await anonymous.get(path).status == 401)
        // Private to caches.
        _ = try await viewer.progress.record(Self.heartbeat(100, at: Date()), for: item)
        let mine = try await APIClient(baseURL: catalog.client.baseURL, key: try catalog.user("Cache").key).get("/v1/me/continue-watching")
        #expect(mine.header("Cache-Control") == "private, no-cache" && mine.header("Vary") == "Authorization")
    }
}
