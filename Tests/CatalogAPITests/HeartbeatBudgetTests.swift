import CatalogModels
import Foundation
import ServiceTestSupport
import Testing

@testable import CatalogService

/// Heartbeats spend the viewer's write budget: a player sending one a second keeps working,
/// one sending a thousand at once gets 429s, and another viewer is not held back.
@Suite struct HeartbeatBudgetTests {
    @Test func aPlayerFloodingHeartbeatsIsRefusedAndAnotherIsNot() async throws {
        let catalog = try TestCatalog(seed: false) { $0.rateLimits = RatePolicy.defaults }
        let item = try await ViewerProgressTests.items(catalog, 1)[0]
        let flooder = catalog.client(key: try catalog.user("Flooder").key)
        let steady = catalog.client(key: try catalog.user("Steady").key)
        let path = "/v1/me/progress/\(item)"
        func beat(_ client: APIClient, _ second: Int) async throws -> Int {
            let body: [String: Any] = ["positionSeconds": second % 600, "clientTime": "2026-11-01T10:00:00.000Z", "deviceId": "phone"]
            return try await client.send("PUT", path, json: body).status
        }
        var statuses: [Int: Int] = [:]
        let started = ContinuousClock.now
        for second in 0..<1000 { statuses[try await beat(flooder, second), default: 0] += 1 }
        let elapsed = Double((ContinuousClock.now - started).components.seconds) + 1
        let policy = try #require(RatePolicy.defaults[.write])
        let quota = policy.quota
        // What refills while the thousand are sent (a loaded machine takes longer to send them).
        let refilled = Int(elapsed * Double(policy.quota) / Double(policy.window)) + 1
        #expect((statuses[200] ?? 0) >= quota && (statuses[200] ?? 0) <= quota + refilled, "the budget's \(quota), and \(refilled) refilled meanwhile: \(statuses)")
        #expect((statuses[429] ?? 0) == 1000 - (statuses[200] ?? 0), "every other answer a 429: \(statuses)")
        // The other viewer's budget is its own; the flooder's refills at 5 a second, more than one heartbeat a second needs.
        #expect(try await beat(steady, 1) == 200)
        try await Task.sleep(for: .milliseconds(1100))
        #expect(try await beat(flooder, 1001) == 200)
    }
}
