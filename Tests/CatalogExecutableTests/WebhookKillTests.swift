import CatalogClient
import CatalogModels
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// Webhooks against the real executable, killed outright mid-delivery: started again, it
/// takes back what it held and every committed change reaches the receiver at least once,
/// each message as first sent.
@Suite struct WebhookKillTests {
    @Test func everyCommittedChangeIsDeliveredAfterKill9() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-webhook-kill-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("catalog.sqlite").path
        let key = try await Executables.bootstrapKey(database: database)
        let arguments = [
            "--database", database, "--migrations", migrationsDirectory.path, "--no-seed", "--rate-limits", "off", "--webhook-allowed-networks", "127.0.0.1/32",
            "--webhook-http-networks", "127.0.0.1/32",
        ]
        let receiver = try await WebhookReceiver()
        var server = try await ServerProcess(arguments, log: directory.appendingPathComponent("server-1.log"), key: key)
        let api = CatalogClient(baseURL: server.client.baseURL, credentials: .apiKey(key), timeout: 10)
        let webhook = try await api.webhooks.create(WebhookInput(url: receiver.url, eventTypes: ["game.created"]))
        try receiver.trust([try #require(webhook.secret)])
        @Sendable func create(_ indices: Range<Int>) async throws -> Set<String> {
            try await withThrowingTaskGroup(of: String.self) { group in
                for index in indices { group.addTask { try await api.games.create(GameInput(name: "Sent \(index)", imageName: "s")).value.id.rawValue } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
        }
        // The first twenty are delivered and answered.
        let answered = try await create(0..<20)
        try await receiver.wait { _ in answered.isSubset(of: receiver.resourceIDs) }
        // The receiver then holds its answers: the next twenty are in flight or still to send
        // when the server dies, however slow the machine.
        try receiver.delayAnswers(by: 3600)
        let held = try await create(20..<40)
        try await receiver.wait { _ in !held.isDisjoint(with: receiver.resourceIDs) }
        server.kill9()
        let created = answered.union(held)
        #expect(answered.isSubset(of: receiver.resourceIDs) && !held.isSubset(of: receiver.resourceIDs), "the kill came mid-delivery")
        try receiver.delayAnswers(by: 0)
        server = try await ServerProcess(arguments, log: directory.appendingPathComponent("server-2.log"), key: key)
        try await receiver.expectEveryOne(of: created)
        _ = server
    }
}
