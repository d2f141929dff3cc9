import CatalogClient
import CatalogIdentity
import CatalogModels
import CatalogService
import CatalogStore
import Foundation
import GRDB
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// Webhooks end to end against a real server on a loopback port and a real receiver
/// (`Tests/Fixtures/webhook_receiver.py`) that verifies every message with the reference
/// Standard Webhooks library: messages of committed changes only, signatures through a
/// secret's rotation, retries on schedule (by a clock the test moves), the endpoint
/// disabled at the end, and the addresses never connected to. Every address these tests
/// use is a loopback one. One test at a time: each starts receivers (Python processes), and
/// the suite's other tests share the machine.
@Suite(.serialized) struct WebhookTests {
    /// The clock attempts are scheduled by, moved by the test.
    final class Clock: Sendable {
        private let milliseconds = Mutex(Timestamp.milliseconds(Date()))
        var now: Int64 { milliseconds.withLock { $0 } }
        func set(_ value: Int64) { milliseconds.withLock { $0 = max($0, value) } }
        var read: @Sendable () -> Int64 { { [self] in now } }
    }

    /// A catalog whose webhooks may reach loopback over http (or what `allowed` says).
    static func catalog(
        clock: Clock? = nil, allowed: [String] = ["127.0.0.0/8"], http: [String] = ["127.0.0.0/8"], timeout: Duration = .seconds(10), directory: URL? = nil,
        configure: (inout CatalogConfiguration) -> Void = { _ in }
    ) throws -> TestCatalog {
        try TestCatalog(seed: false, databaseDirectory: directory) { configuration in
            configuration.webhookAllowedNetworks = allowed
            configuration.webhookHTTPNetworks = http
            configuration.webhookTimeout = timeout
            if let clock { configuration.webhookClock = clock.read }
            configure(&configuration)
        }
    }

    /// Creates an endpoint for `url` and has `receiver` trust its secret.
    static func endpoint(_ catalog: TestCatalog, _ url: String, events: [String]? = nil, receiver: WebhookReceiver? = nil) async throws -> Webhook {
        let created = try await catalog.api.webhooks.create(WebhookInput(url: url, eventTypes: events, description: "tests"))
        let secret = try #require(created.secret)
        #expect(secret.hasPrefix("whsec_") && WebhookSigning.key(of: secret)?.count == 32)
        try receiver?.trust([secret])
        return created
    }

    static func game(_ catalog: TestCatalog, _ name: String = "Sent") async throws -> CatalogID {
        try await catalog.api.games.create(GameInput(name: name, imageName: "g")).value.id
    }

    /// The endpoint's deliveries once `condition` holds of them (or after `timeout` seconds).
    static func deliveries(
        _ catalog: TestCatalog, _ webhook: CatalogID, timeout: Double = 60, until condition: ([WebhookDelivery]) -> Bool
    ) async throws -> [WebhookDelivery] {
        let end = Date().addingTimeInterval(timeout)
        while true {
            catalog.application.wakeWebhooks()
            let page = try await catalog.api.webhooks.deliveries(of: webhook, limit: 100).items
            if condition(page) || Date() > end { return page }
            try await Task.sleep(for: .milliseconds(25))
        }
    }

    @Test(arguments: TestEngine.all) func committedChangesArriveSignedAndVerified(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try Self.catalog()
            defer { try? catalog.stop() }
            let receiver = try await WebhookReceiver()
            let webhook = try await Self.endpoint(catalog, receiver.url, events: ["game.created", "game.updated", "game.deleted"], receiver: receiver)
            // Each change's message is rendered once, as the feed then shows the resource:
            // each waits for the one before, so each shows the change it is about.
            let game = try await Self.game(catalog)
            _ = try await receiver.wait { $0.count >= 1 }
            _ = try await catalog.api.games.patch(game, MergePatch().set("name", "Renamed"))
            _ = try await receiver.wait { $0.count >= 2 }
            try await catalog.api.games.delete(game)
            // Not subscribed: no message.
            _ = try await catalog.api.locations.create(LocationInput(name: "L", countryCode: "FR", latitude: 1, longitude: 2))
            let received = try await receiver.wait { $0.count >= 3 }
            #expect(received.count == 3)
            #expect(Set(received.compactMap(\.type)) == ["game.created", "game.updated", "game.deleted"])
            for message in received {
                #expect(message.verified == [0], "\(message.body)")
                #expect(message.userAgent?.hasPrefix("Catalog-Webhooks/") == true)
                #expect(message.contentType == "application/json")
                #expect(message.id?.hasPrefix("msg_") == true)
                #expect(message.data["id"] as? String == game.rawValue)
                let sent = try #require(message.timestamp.flatMap(Double.init))
                #expect(abs(sent - Date().timeIntervalSince1970) < 60)
            }
            #expect(Set(received.compactMap(\.id)).count == 3)
            let byType = Dictionary(received.map { ($0.type ?? "", $0) }, uniquingKeysWith: { first, _ in first })
            #expect((byType["game.created"]?.data["resource"] as? [String: Any])?["name"] as? String == "Sent")
            #expect(byType["game.updated"]?.data["version"] as? Int == 2)
            #expect(byType["game.deleted"]?.data["deleted"] as? Bool == true)
            // Each message's body decodes as the client's model, and the server shows it as sent.
            let message = try messageDecoder.decode(WebhookMessage.self, from: Data(try #require(byType["game.created"]).body.utf8))
            #expect(message.type == "game.created" && message.data.id == game && message.data.knownType == .game)
            let deliveries = try await Self.deliveries(catalog, webhook.id) { $0.allSatisfy { $0.status == .delivered } && $0.count == 3 }
            #expect(deliveries.count == 3 && deliveries.allSatisfy { $0.status == .delivered && $0.attemptCount == 1 })
            let created = try #require(deliveries.first { $0.eventType == "game.created" })
            let shown = try await catalog.api.webhooks.delivery(created.id, of: webhook.id)
            #expect(shown.payload == message)
            #expect(shown.attempts?.map(\.statusCode) == [204])
            #expect(shown.messageId == byType["game.created"]?.id)
            // The endpoint never shows its secret again.
            let fetched = try await catalog.client.get("/v1/webhooks/\(webhook.id)")
            #expect(!fetched.text.contains("whsec_") && fetched.header("Cache-Control") == "no-store")
            #expect(try await catalog.api.webhooks.list().allSatisfy { $0.secret == nil })
        }
    }

    /// A transaction that rolls back after its change was logged makes no message; likes
    /// and views added up (no new version) make none either.
    @Test func rolledBackAndCountOnlyChangesMakeNoMessage() async throws {
        let catalog = try Self.catalog()
        defer { try? catalog.stop() }
        let receiver = try await WebhookReceiver()
        _ = try await Self.endpoint(catalog, receiver.url, receiver: receiver)
        let doomed = CatalogID()
        let queue = try DatabaseQueue(path: catalog.directory.appendingPathComponent("catalog.sqlite").path)
        try await queue.write { db in
            try db.inSavepoint {
                try db.execute(
                    sql: "INSERT INTO games (id, name, description, image_name, created_at, updated_at, version) VALUES (?, 'Doomed', '', 'g', 0, 0, 1)",
                    arguments: [doomed.rawValue])
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM webhook_events") == 1)
                return .rollback
            }
        }
        try queue.close()
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Watched", streamURL: URL(string: "https://example.com/v")!)).value.id
        for session in 0..<3 {
            _ = try await catalog.client.send("POST", "/v1/playable-items/\(item)/views", json: ["sessionId": "s\(session)", "positionSeconds": 60])
        }
        // Added up now (or already, by the server's own tick): the item's views changed, its version did not.
        try await onThread { [application = catalog.application] in _ = try application.applyCounts() }
        let counted = try await catalog.api.playableItems.get(item).value
        #expect(counted.viewCount == 1 && counted.version == 1, "one view a day per viewer")
        let kept = try await Self.game(catalog, "Kept")
        let received = try await receiver.wait { $0.contains { $0.data["id"] as? String == kept.rawValue } }
        try await Task.sleep(for: .milliseconds(300))
        let all = receiver.received
        #expect(!all.contains { $0.body.contains(doomed.rawValue) })
        #expect(all.filter { $0.data["id"] as? String == item.rawValue }.compactMap(\.type) == ["playableItem.created"], "\(all.map(\.body))")
        #expect(received.allSatisfy { $0.verified == [0] })
    }

    @Test(arguments: TestEngine.all) func rotationSignsWithBothSecretsDuringTheOverlap(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try Self.catalog()
            defer { try? catalog.stop() }
            let receiver = try await WebhookReceiver()
            let webhook = try await Self.endpoint(catalog, receiver.url, receiver: receiver)
            let first = try #require(webhook.secret)
            _ = try await Self.game(catalog, "One")
            try await receiver.wait { $0.count == 1 }
            let rotated = try await catalog.api.webhooks.rotateSecret(of: webhook.id)
            #expect(rotated.secret != first && rotated.previousSecretExpiresAt.map { $0 > Date().addingTimeInterval(86_000) } == true)
            try receiver.trust([rotated.secret, first])
            _ = try await Self.game(catalog, "Two")
            try await receiver.wait { $0.count == 2 }
            let ended = try await catalog.api.webhooks.rotateSecret(of: webhook.id, overlapSeconds: 0)
            #expect(ended.previousSecretExpiresAt == nil)
            try receiver.trust([ended.secret, rotated.secret])
            _ = try await Self.game(catalog, "Three")
            let received = try await receiver.wait { $0.count == 3 }
            #expect(received.map(\.verified) == [[0], [0, 1], [0]], "\(received.map(\.body))")
            #expect(received.map { $0.signature?.split(separator: " ").count } == [1, 2, 1])
        }
    }

    @Test(arguments: TestEngine.all) func aReceiverFailingThreeTimesGetsTheSameMessageOnSchedule(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let clock = Clock()
            let catalog = try Self.catalog(clock: clock)
            defer { try? catalog.stop() }
            let receiver = try await WebhookReceiver(["--fail-first", "3"])
            let webhook = try await Self.endpoint(catalog, receiver.url, receiver: receiver)
            _ = try await Self.game(catalog)
            for attempt in 1...4 {
                let received = try await receiver.wait { $0.count >= attempt }
                #expect(received.count == attempt)
                let deliveries = try await Self.deliveries(catalog, webhook.id) { $0.first?.attemptCount == attempt }
                let delivery = try #require(deliveries.first)
                guard attempt < 4 else {
                    #expect(delivery.status == .delivered && delivery.nextAttemptAt == nil)
                    break
                }
                let last = try #require(delivery.lastAttempt), next = try #require(delivery.nextAttemptAt)
                #expect(delivery.status == .pending && last.statusCode == 500 && last.response == "nope" && last.error == "HTTP 500")
                // 5 s, 5 min, 30 min, each ±20%.
                let expected = [5.0, 300, 1800][attempt - 1], waited = next.timeIntervalSince(last.at)
                #expect(waited >= expected * 0.8 - 0.01 && waited <= expected * 1.2 + 0.01, "attempt \(attempt) waited \(waited) s")
                // Not before it is due.
                clock.set(Timestamp.milliseconds(next) - 1000)
                catalog.application.wakeWebhooks()
                try await Task.sleep(for: .milliseconds(200))
                #expect(receiver.received.count == attempt)
                clock.set(Timestamp.milliseconds(next) + 1)
            }
            let received = receiver.received
            #expect(received.map(\.attempt) == [1, 2, 3, 4] && received.map(\.status) == [500, 500, 500, 204])
            #expect(Set(received.map(\.body)).count == 1 && Set(received.compactMap(\.id)).count == 1)
            #expect(received.allSatisfy { $0.verified == [0] })
            #expect((1...4).contains(receiver.connections), "the connection log counts what refused addresses never get")
            let delivery = try await catalog.api.webhooks.deliveries(of: webhook.id).items[0]
            let shown = try await catalog.api.webhooks.delivery(delivery.id, of: webhook.id)
            #expect(shown.attempts?.map(\.statusCode) == [500, 500, 500, 204])
            let endpoint = try await catalog.api.webhooks.get(webhook.id).value
            #expect(endpoint.enabled && endpoint.failingSince == nil && endpoint.pending == 0)
        }
    }

    /// A receiver that never answers: each attempt times out, the next comes on schedule,
    /// the delivery fails three days after the first, and the endpoint is disabled.
    @Test func aSilentReceiverIsRetriedForThreeDaysThenDisabled() async throws {
        let clock = Clock()
        let catalog = try Self.catalog(clock: clock, timeout: .milliseconds(300))
        defer { try? catalog.stop() }
        let receiver = try await WebhookReceiver(["--hang"])
        let webhook = try await Self.endpoint(catalog, receiver.url, receiver: receiver)
        let start = clock.now
        _ = try await Self.game(catalog)
        let delays: [Double] = [5, 300, 1800, 7200, 18_000, 36_000]
        var attempts = 0
        while true {
            let deliveries = try await Self.deliveries(catalog, webhook.id, timeout: 60) { ($0.first?.attemptCount ?? 0) > attempts }
            let delivery = try #require(deliveries.first)
            #expect(delivery.attemptCount == attempts + 1)
            attempts = delivery.attemptCount
            let last = try #require(delivery.lastAttempt)
            #expect(last.statusCode == nil && last.error?.contains("imeout") == true, "\(last)")
            guard delivery.status == .pending, let next = delivery.nextAttemptAt else {
                #expect(delivery.status == .failed)
                break
            }
            let expected = delays[min(attempts, delays.count) - 1], waited = next.timeIntervalSince(last.at)
            #expect(waited >= expected * 0.8 - 0.01 && waited <= expected * 1.2 + 0.01, "attempt \(attempts) waited \(waited) s")
            #expect(Timestamp.milliseconds(next) - start <= 3 * 86_400_000)
            clock.set(Timestamp.milliseconds(next) + 1)
            try #require(attempts < 20)
        }
        // 5 s … 10 h, then every 10 h: ten to thirteen attempts fit in three days with the jitter.
        #expect((10...13).contains(attempts), "\(attempts) attempts")
        #expect(receiver.received.count == attempts && Set(receiver.received.compactMap(\.id)).count == 1)
        let endpoint = try await catalog.api.webhooks.get(webhook.id).value
        #expect(!endpoint.enabled && endpoint.disabledReason?.contains("failed") == true && endpoint.disabledAt != nil)
        let metrics = try await catalog.api.metrics()
        #expect(metrics.contains("catalog_webhook_deliveries_total{result=\"failed\"} 1"))
        #expect(metrics.contains("catalog_webhook_deliveries_total{result=\"retrying\"} \(attempts - 1)"))
        // A disabled endpoint gets no new messages, and its deliveries are not retried until it is enabled.
        _ = try await Self.game(catalog, "Unsent")
        catalog.application.wakeWebhooks()
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await catalog.api.webhooks.deliveries(of: webhook.id).items.count == 1)
        let failed = try await catalog.api.webhooks.deliveries(of: webhook.id).items[0]
        let refused = await expectProblem(409, "webhookDisabled") { try await catalog.api.webhooks.retry(failed.id, of: webhook.id) }
        #expect(refused != nil)
        let enabled = try await catalog.api.webhooks.update(webhook.id, WebhookUpdate(enabled: true)).value
        #expect(enabled.enabled && enabled.disabledReason == nil && enabled.failingSince == nil)
        // A retried delivery starts its schedule again: the attempt after the retry's is 5 s later.
        #expect(try await catalog.api.webhooks.retry(failed.id, of: webhook.id).status == .pending)
        let again = try await Self.deliveries(catalog, webhook.id) { ($0.first?.attemptCount ?? 0) > attempts && $0.first?.nextAttemptAt != nil }
        let last = try #require(again.first?.lastAttempt), next = try #require(again.first?.nextAttemptAt)
        let waited = next.timeIntervalSince(last.at)
        #expect(waited >= 4 - 0.01 && waited <= 6 + 0.01, "the attempt after a retry's waited \(waited) s")
    }

    /// An endpoint gets the changes committed once it exists, or once it is enabled again:
    /// none of the events still waiting from before, however they are numbered (SQLite
    /// numbers them from 1 again once none waits). A disabled endpoint gets no message
    /// made while it is disabled, even of a change committed before.
    @Test(arguments: TestEngine.all) func anEndpointGetsOnlyTheChangesMadeOnceItExists(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tests-\(UUID().uuidString)")
            let early = try await WebhookReceiver(), late = try await WebhookReceiver(), toggled = try await WebhookReceiver()
            // Nothing is sent while the events wait.
            let waiting = try Self.catalog(directory: directory) { $0.webhookDeliveries = false }
            _ = try await Self.endpoint(waiting, early.url, receiver: early)
            let toggledEndpoint = try await Self.endpoint(waiting, toggled.url, receiver: toggled)
            let before = try await Self.game(waiting, "Before")
            _ = try await Self.endpoint(waiting, late.url, receiver: late)
            let after = try await Self.game(waiting, "After")
            _ = try await waiting.api.webhooks.update(toggledEndpoint.id, WebhookUpdate(enabled: false))
            let whileDisabled = try await Self.game(waiting, "While disabled")
            _ = try await waiting.api.webhooks.update(toggledEndpoint.id, WebhookUpdate(enabled: true))
            let enabledAgain = try await Self.game(waiting, "Enabled again")
            try waiting.stop()
            let sending = try Self.catalog(directory: directory)
            defer { try? sending.stop() }
            func ids(_ receiver: WebhookReceiver, _ count: Int) async throws -> [String] {
                try await receiver.wait { $0.count >= count }.compactMap { $0.data["id"] as? String }
            }
            #expect(try await ids(early, 4) == [before, after, whileDisabled, enabledAgain].map(\.rawValue))
            #expect(try await ids(late, 3) == [after, whileDisabled, enabledAgain].map(\.rawValue))
            #expect(try await ids(toggled, 1) == [enabledAgain].map(\.rawValue))
            // Every event sent: the next ones are numbered from 1 again on SQLite, and go to all.
            let next = try await Self.game(sending, "Next")
            #expect(try await ids(early, 5).last == next.rawValue)
            #expect(try await ids(late, 4).last == next.rawValue)
            #expect(try await ids(toggled, 2) == [enabledAgain, next].map(\.rawValue))
            let all = early.received + late.received + toggled.received
            #expect(all.count == 11 && all.allSatisfy { $0.verified == [0] && $0.type == "game.created" })
        }
    }

    /// A hosted video's outcome is a message of its own: ready, or failed.
    @Test func aVideoReadyOrFailedIsSent() async throws {
        let catalog = try Self.catalog()
        defer { try? catalog.stop() }
        let receiver = try await WebhookReceiver()
        _ = try await Self.endpoint(catalog, receiver.url, events: ["video.ready", "video.failed"], receiver: receiver)
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Hosted", streamURL: URL(string: "https://example.com/v")!)).value.id
        let clip = try Data(contentsOf: try await TestVideos.clip(seconds: 1, width: 160, height: 90, audio: false))
        let created = try await catalog.inProcess.send("POST", "/v1/playable-items/\(item)/video", headers: ["Content-Type": "application/octet-stream"], body: clip)
        #expect(created.status == 201)
        try await catalog.processVideos()
        let received = try await receiver.wait { !$0.isEmpty }
        #expect(received.compactMap(\.type) == ["video.ready"])
        let video = (received.first?.data["resource"] as? [String: Any])?["video"] as? [String: Any]
        #expect(received.first?.data["id"] as? String == item.rawValue && video?["status"] as? String == "ready")
        let bad = try await catalog.api.playableItems.create(PlayableItemInput(title: "Not a video", streamURL: URL(string: "https://example.com/b")!)).value.id
        let text = try await catalog.inProcess.send(
            "POST", "/v1/playable-items/\(bad)/video", headers: ["Content-Type": "application/octet-stream"], body: Data("not a video, just text".utf8))
        #expect(text.status == 201)
        try await catalog.processVideos()
        let both = try await receiver.wait { $0.count >= 2 }
        #expect(both.compactMap(\.type) == ["video.ready", "video.failed"] && both.last?.data["id"] as? String == bad.rawValue)
        let failed = (both.last?.data["resource"] as? [String: Any])?["video"] as? [String: Any]
        #expect(failed?["status"] as? String == "failed" && (failed?["error"] as? String)?.contains("not a video") == true, "\(both.last?.body ?? "")")
    }

    @Test func bodiesAreCheckedWholeAndEndpointsAreBounded() async throws {
        let catalog = try Self.catalog(allowed: [], http: [])
        defer { try? catalog.stop() }
        func refused(_ body: [String: Any], _ pointers: [String]) async throws {
            let answer = try await catalog.client.send("POST", "/v1/webhooks", json: body)
            #expect(answer.status == 422, "\(body): \(answer.text)")
            guard answer.status == 422 else { return }
            let problem = try answer.decode(Problem.self)
            #expect(Set(problem.errors?.map(\.pointer) ?? []) == Set(pointers), "\(body): \(answer.text)")
        }
        try await refused(["eventTypes": ["*"]], ["/url"])
        try await refused(["url": "https://user:pw@example.com/h"], ["/url"])
        try await refused(["url": "https://example.com/h#frag"], ["/url"])
        try await refused(["url": "ftp://example.com/h"], ["/url"])
        try await refused(["url": "http://example.com/h"], ["/url"])
        try await refused(["url": "https://10.1.2.3/h"], ["/url"])
        try await refused(["url": "https://[::ffff:169.254.169.254]/h"], ["/url"])
        try await refused(["url": "https://example.com/" + String(repeating: "a", count: 2100)], ["/url"])
        try await refused(["url": "https://example.com/h", "eventTypes": []], ["/eventTypes"])
        try await refused(["url": "https://example.com/h", "eventTypes": ["game.created", "nope"]], ["/eventTypes/1"])
        try await refused(["url": "https://example.com/h", "eventTypes": "game.created"], ["/eventTypes"])
        try await refused(["url": "https://example.com/h", "description": String(repeating: "d", count: 501)], ["/description"])
        try await refused(["url": "https://example.com/h", "enabled": "yes", "secret": "mine"], ["/enabled", "/secret"])
        let made = try await catalog.api.webhooks.create(WebhookInput(url: "https://example.com/h", enabled: false))
        #expect(made.eventTypes == ["*"] && !made.enabled && made.description.isEmpty)
        // Merge patches: only what is given changes; a stale If-Match is 412.
        let patched = try await catalog.api.webhooks.update(made.id, WebhookUpdate(description: "New"), ifMatch: "\"1\"")
        #expect(patched.value.description == "New" && patched.value.url == "https://example.com/h" && patched.value.version == 2)
        let stale = await expectProblem(412) { try await catalog.api.webhooks.update(made.id, WebhookUpdate(description: "Old"), ifMatch: "\"1\"") }
        #expect(stale != nil)
        let nulled = try await catalog.client.send(
            "PATCH", "/v1/webhooks/\(made.id)", json: ["url": NSNull(), "description": NSNull()], contentType: "application/merge-patch+json")
        #expect(nulled.status == 422 && nulled.text.contains("/url") && !nulled.text.contains("/description"))
        // At most 100 endpoints.
        for index in 1..<WebhookRules.maxEndpoints {
            _ = try await catalog.inProcess.send("POST", "/v1/webhooks", json: ["url": "https://example.com/\(index)", "enabled": false])
        }
        let full = await expectProblem(409, "quotaExceeded") { try await catalog.api.webhooks.create(WebhookInput(url: "https://example.com/last")) }
        #expect(full != nil)
        #expect(try await catalog.api.webhooks.list().count == WebhookRules.maxEndpoints)
        try await catalog.api.webhooks.delete(made.id)
        let gone = await expectProblem(404) { try await catalog.api.webhooks.get(made.id) }
        #expect(gone != nil)
    }
}

/// The decoder the catalog's clients use (dates with milliseconds).
private let messageDecoder = CatalogJSON.makeDecoder()
