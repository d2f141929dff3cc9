import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// Webhooks' limits: where they may go (refused addresses, verified https), what an
/// answer may cost, what a backlog may hold, and a silent endpoint kept to its own.
extension WebhookTests {
    /// No connection is made to a refused address: not to a name that resolves to one,
    /// not to a literal one an operator stopped allowing. Both listen on loopback and must
    /// see nothing.
    @Test(arguments: TestEngine.all) func refusedAddressesAreNeverConnectedTo(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            // `localhost` resolves to 127.0.0.1 (and ::1): refused when only 127.0.0.2 is allowed.
            let named = try await WebhookReceiver()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tests-\(UUID().uuidString)")
            let narrow = try Self.catalog(allowed: ["127.0.0.2/32"], directory: directory)
            let byName = try await Self.endpoint(narrow, "http://localhost:\(named.port)/hooks", receiver: named)
            _ = try await Self.game(narrow)
            let refusedByName = try await Self.deliveries(narrow, byName.id) { $0.first?.lastAttempt != nil }
            let error = try #require(refusedByName.first?.lastAttempt?.error)
            #expect(error.contains("is a loopback address, refused"), "\(error)")
            #expect(refusedByName.first?.status == .pending && refusedByName.first?.lastAttempt?.statusCode == nil)
            // A literal address refused at creation.
            let literal = await expectProblem(422, "validationFailed") {
                try await narrow.api.webhooks.create(WebhookInput(url: "http://127.0.0.1:\(named.port)/hooks"))
            }
            #expect(literal?.errors?.first?.message.contains("loopback") == true)
            try narrow.stop()
            #expect(named.connections == 0 && named.received.isEmpty)

            // An endpoint at 127.0.0.2 made while it was allowed, then refused after a restart.
            let target = try await WebhookReceiver(host: "127.0.0.2")
            let wide = try Self.catalog(allowed: ["127.0.0.2/32"], directory: directory)
            let byAddress = try await Self.endpoint(wide, target.url, receiver: target)
            try await wide.api.webhooks.delete(byName.id)
            try wide.stop()
            let restarted = try Self.catalog(allowed: ["127.0.0.1/32"], directory: directory)
            defer { try? restarted.stop() }
            _ = try await Self.game(restarted, "After")
            let refused = try await Self.deliveries(restarted, byAddress.id) { $0.first?.lastAttempt != nil }
            #expect(refused.first?.lastAttempt?.error?.contains("127.0.0.2 is a loopback address, refused") == true, "\(refused)")
            #expect(target.connections == 0 && target.received.isEmpty)
        }
    }

    /// An endpoint that never answers holds four requests of its own and nothing of any
    /// other's: a healthy endpoint gets every message meanwhile.
    @Test func aSilentEndpointNeverHoldsUpAnother() async throws {
        // Attempts that last longer than the test: the silent endpoint's first four never end.
        let catalog = try Self.catalog(timeout: .seconds(600))
        defer { try? catalog.stop() }
        let silent = try await WebhookReceiver(["--hang"])
        let healthy = try await WebhookReceiver()
        _ = try await Self.endpoint(catalog, silent.url, receiver: silent)
        _ = try await Self.endpoint(catalog, healthy.url, receiver: healthy)
        for index in 0..<20 { _ = try await Self.game(catalog, "G\(index)") }
        let received = try await healthy.wait { $0.count >= 20 }
        #expect(received.count == 20 && received.allSatisfy { $0.verified == [0] })
        // Four hang, the rest wait their turn.
        #expect(silent.received.count == 4)
    }

    /// https is verified: a receiver whose certificate no trusted CA signed gets nothing
    /// (the handshake fails, no request is made); trusting its CA (`--webhook-ca-file`),
    /// it gets every message.
    @Test func httpsReceiversAreVerified() async throws {
        let certificates = try TestCertificates.shared()
        let receiver = try await WebhookReceiver(["--tls-cert", certificates.certificateFile, "--tls-key", certificates.keyFile])
        let untrusting = try Self.catalog(allowed: ["127.0.0.1/32"], http: [])
        let refused = try await Self.endpoint(untrusting, receiver.url, receiver: receiver)
        _ = try await Self.game(untrusting)
        let failed = try await Self.deliveries(untrusting, refused.id) { $0.first?.lastAttempt != nil }
        #expect(failed.first?.lastAttempt?.statusCode == nil && failed.first?.lastAttempt?.error?.lowercased().contains("certificate") == true, "\(failed)")
        try untrusting.stop()
        #expect(receiver.received.isEmpty)
        let trusting = try Self.catalog(allowed: ["127.0.0.1/32"], http: []) { $0.webhookCAFile = certificates.caFile }
        defer { try? trusting.stop() }
        _ = try await Self.endpoint(trusting, receiver.url, receiver: receiver)
        _ = try await Self.game(trusting)
        let received = try await receiver.wait { !$0.isEmpty }
        #expect(received.count == 1 && received.first?.verified == [0] && received.first?.type == "game.created")
    }

    /// At most 4 KiB of an answer is kept; a redirect is a failure, never followed.
    @Test func answersAreCutAt4KiBAndRedirectsAreNotFollowed() async throws {
        let catalog = try Self.catalog(clock: Clock())
        defer { try? catalog.stop() }
        let big = try await WebhookReceiver(["--big-response", "1000000"])
        let elsewhere = try await WebhookReceiver()
        let redirecting = try await WebhookReceiver(["--redirect", elsewhere.url])
        let bigEndpoint = try await Self.endpoint(catalog, big.url, receiver: big)
        let redirectEndpoint = try await Self.endpoint(catalog, redirecting.url, receiver: redirecting)
        _ = try await Self.game(catalog)
        let delivered = try await Self.deliveries(catalog, bigEndpoint.id) { $0.first?.status == .delivered }
        #expect(delivered.first?.lastAttempt?.statusCode == 200)
        #expect(delivered.first?.lastAttempt?.response?.utf8.count == 4096)
        let redirected = try await Self.deliveries(catalog, redirectEndpoint.id) { $0.first?.lastAttempt != nil }
        #expect(redirected.first?.status == .pending && redirected.first?.lastAttempt?.statusCode == 302)
        #expect(redirected.first?.lastAttempt?.error == "HTTP 302 (redirects are not followed)")
        #expect(redirecting.received.count == 1 && elsewhere.received.isEmpty)
    }

    /// Past the backlog bound, the oldest waiting deliveries are dropped and counted.
    @Test func backlogsAreBoundedOldestFirst() async throws {
        let catalog = try Self.catalog(clock: Clock())
        defer { try? catalog.stop() }
        // Nothing listens on port 1: every attempt fails at once and waits for the next.
        let webhook = try await Self.endpoint(catalog, "http://127.0.0.1:1/hooks")
        for index in 0..<12 { _ = try await Self.game(catalog, "G\(index)") }
        let waiting = try await Self.deliveries(catalog, webhook.id) { $0.count == 12 && $0.allSatisfy { $0.attemptCount == 1 } }
        #expect(waiting.count == 12 && waiting.allSatisfy { $0.status == .pending })
        let (pending, dropped) = try await onThread { [queue = catalog.application.store.webhookQueue] in
            try queue.bound(backlog: 5, now: Timestamp.milliseconds(Date()))
        }
        #expect(dropped == 7 && pending[webhook.id] == 5)
        let endpoint = try await catalog.api.webhooks.get(webhook.id).value
        #expect(endpoint.dropped == 7 && endpoint.pending == 5)
        let droppedOnes = try await catalog.api.webhooks.deliveries(of: webhook.id, status: .dropped, limit: 100).items
        let kept = try await catalog.api.webhooks.deliveries(of: webhook.id, status: .pending, limit: 100).items
        #expect(droppedOnes.count == 7 && kept.count == 5)
        #expect(droppedOnes.map(\.createdAt).max()! <= kept.map(\.createdAt).min()!)
        // Pages: newest first, and the cursor goes on.
        let first = try await catalog.api.webhooks.deliveries(of: webhook.id, limit: 5)
        let second = try await catalog.api.webhooks.deliveries(of: webhook.id, limit: 5, cursor: first.nextCursor)
        #expect(Set(first.items.map(\.id)).isDisjoint(with: second.items.map(\.id)) && second.items.count == 5)
        // The next page is linked, its cursor bound to the status it lists.
        let path = "/v1/webhooks/\(webhook.id)/deliveries"
        let linked = try await catalog.client.send("GET", path + "?status=pending&limit=2")
        let cursor = try #require(try linked.decode(Page<WebhookDelivery>.self).nextCursor)
        #expect(linked.header("Link") == "<\(path)?status=pending&limit=2&cursor=\(cursor)>; rel=\"next\"")
        #expect(try await catalog.client.send("GET", path + "?status=pending&limit=2&cursor=\(cursor)").status == 200)
        let crossed = try await catalog.client.send("GET", path + "?status=dropped&cursor=\(cursor)")
        #expect(crossed.status == 400 && crossed.problem?.detail?.contains("another status") == true, "\(crossed.text)")
        #expect(try await catalog.client.send("GET", path + "?cursor=\(cursor)").status == 400)
        let last = try await catalog.client.send("GET", path + "?status=pending&limit=100")
        #expect(last.status == 200 && last.header("Link") == nil)
    }
}
