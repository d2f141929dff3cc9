import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// `ViewerSync`: a viewer's state on its devices, changed offline and synced, converging on
/// the server's whatever order the writes arrive in.
@Suite struct ViewerSyncTests {
    /// What a device or the server holds, for comparing.
    struct Held: Equatable, CustomStringConvertible {
        var progress: [CatalogID: PlaybackProgress]
        var favorites: Set<FavoriteKey>
        var ratings: [CatalogID: Rating]

        var description: String { "progress \(progress.mapValues(\.positionSeconds)), favorites \(favorites.count), ratings \(ratings)" }
    }

    static func held(_ device: ViewerSync) async -> Held {
        Held(progress: await device.progress, favorites: Set(await device.favorites.keys), ratings: await device.ratings)
    }

    /// The server's state, read through the API (not the feed).
    static func held(_ client: CatalogClient, items: [CatalogID]) async throws -> Held {
        var progress: [CatalogID: PlaybackProgress] = [:]
        var ratings: [CatalogID: Rating] = [:]
        for item in items {
            progress[item] = try await client.progress.get(item)
            let rating = try await client.viewer.rating(item).rating
            if rating != .none { ratings[item] = rating }
        }
        let favorites = try await client.viewer.favorites(limit: 100).items.map { FavoriteKey(type: $0.type, id: $0.id) }
        return Held(progress: progress, favorites: Set(favorites), ratings: ratings)
    }

    /// Three devices of one viewer, with clocks up to five minutes off, each going offline
    /// and online at random while it plays, favorites and rates: once all are back and have
    /// synced twice, each holds exactly what the server holds.
    @Test(arguments: TestEngine.all) func threeDevicesConvergeOnTheServersState(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let user = try catalog.user("Viewer")
            let items = try await ViewerProgressTests.items(catalog, 3)
            let api = CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(user.key), timeout: 10)
            for seed in [UInt64(7), 35, 2026] {
                var random = SeededGenerator(seed: seed)
                // Each device keeps a copy of the catalog, and the viewer's state beside it.
                let devices = (0..<3).map { _ in CatalogSync(client: CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(user.key), timeout: 10)).viewer }
                let skews = (0..<3).map { _ in Double.random(in: -300...300, using: &random) }
                var online = [true, true, true]
                for device in devices { try await device.sync() }
                for step in 0..<40 {
                    let index = Int.random(in: 0..<3, using: &random)
                    if Int.random(in: 0..<4, using: &random) == 0 { online[index].toggle() }
                    let device = devices[index]
                    let item = items[Int.random(in: 0..<items.count, using: &random)]
                    switch Int.random(in: 0..<6, using: &random) {
                    case 0..<3:
                        // Most players give the running time (so steady heartbeats collapse in the queue).
                        let heartbeat = ProgressInput(
                            positionSeconds: Double(Int.random(in: 0...600, using: &random)), durationSeconds: Bool.random(using: &random) ? 600 : nil,
                            clientTime: Date(timeIntervalSinceNow: skews[index] - Double(40 - step)), deviceId: "device-\(index)")
                        try await device.record(heartbeat, for: item, itemDuration: 600)
                    case 3, 4:
                        try await device.setFavorite(.playableItem, item, Bool.random(using: &random))
                    default:
                        try await device.rate(item, [Rating.like, .dislike, .none].randomElement(using: &random) ?? .none)
                    }
                    if online[index] { try await device.sync() }
                }
                // Back online, in some order; then each reads what the later ones sent.
                var queued = 0
                for device in devices { queued += await device.queue.count }
                #expect(queued > 0, "seed \(seed): some writes were made offline")
                for device in devices.shuffled(using: &random) { try await device.sync() }
                for device in devices { try await device.sync() }
                let server = try await Self.held(api, items: items)
                #expect(!server.progress.isEmpty, "seed \(seed): something to converge on")
                for (index, device) in devices.enumerated() {
                    let queue = await device.queue
                    #expect(queue.isEmpty)
                    let held = await Self.held(device)
                    #expect(held == server, "seed \(seed), device \(index): \(held) against the server's \(server)")
                }
            }
        }
    }

    /// A player's steady heartbeats take one place in the queue; a finish keeps its own.
    @Test func steadyHeartbeatsCollapseAndFinishesStay() async throws {
        let item = CatalogID()
        let device = ViewerSync(client: CatalogClient(baseURL: URL(string: "http://127.0.0.1:9")!, timeout: 1, retries: 0))
        let start = Date(timeIntervalSinceNow: -3600)
        func beat(_ seconds: Double, _ offset: Double, device name: String = "phone", duration: Double? = 600) -> ProgressInput {
            ProgressInput(positionSeconds: seconds, durationSeconds: duration, clientTime: start + offset, deviceId: name)
        }
        for (index, seconds) in [10.0, 20, 30].enumerated() { try await device.record(beat(seconds, Double(index)), for: item) }
        let (queued, position) = (await device.queue.count, await device.progress[item]?.positionSeconds)
        #expect(queued == 1 && position == 30)
        try await device.record(beat(560, 10), for: item)  // a finish: kept
        try await device.record(beat(5, 20), for: item)  // begun again: kept after it
        try await device.record(beat(15, 21), for: item)  // steady again: takes the last one's place
        try await device.record(beat(25, 22, device: "tv"), for: item)  // another device: its own place
        try await device.record(beat(35, 23, duration: nil), for: item)  // no running time given: kept
        let count = await device.queue.count
        #expect(count == 5)
        let progress = await device.progress[item]
        #expect(progress?.playCount == 1 && progress?.positionSeconds == 35)
    }

    /// The queue outlives the app: writes made offline and saved are sent by the next run.
    @Test func aQueueSavedOfflineIsSentByTheNextRun() async throws {
        let catalog = try TestCatalog(seed: false)
        let user = try catalog.user("Viewer")
        let item = try await ViewerProgressTests.items(catalog, 1)[0]
        let store = InMemoryViewerSyncStore()
        // Offline: a server that is not there.
        let offline = ViewerSync(client: CatalogClient(baseURL: URL(string: "http://127.0.0.1:9")!, credentials: .apiKey(user.key), timeout: 2, retries: 0), store: store)
        try await offline.record(ProgressInput(positionSeconds: 120, clientTime: Date(), deviceId: "plane"), for: item, itemDuration: 600)
        try await offline.setFavorite(.playableItem, item, true)
        try await offline.rate(item, .like)
        await #expect(throws: CatalogClientError.self) { try await offline.sync() }
        let (queued, position) = (await offline.queue.count, await offline.progress[item]?.positionSeconds)
        #expect(queued == 3 && position == 120, "applied on the device at once")

        let api = CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(user.key), timeout: 10)
        let landed = ViewerSync(client: api, store: store)
        try await landed.sync()
        let landedQueue = await landed.queue
        #expect(landedQueue.isEmpty)
        #expect(try await api.progress.get(item)?.positionSeconds == 120)
        #expect(try await api.viewer.rating(item).rating == .like)
        #expect(try await api.viewer.favorites().items.map(\.id) == [item])
        let (device, server) = (await Self.held(landed), try await Self.held(api, items: [item]))
        #expect(device == server)
        // A write the server refuses for good (its item deleted meanwhile) leaves the queue.
        try await landed.rate(item, .dislike)
        try await catalog.api.playableItems.delete(item)
        try await landed.sync()
        let (queue, ratings, progress) = (await landed.queue, await landed.ratings, await landed.progress)
        #expect(queue.isEmpty && ratings.isEmpty && progress.isEmpty)
    }
}
