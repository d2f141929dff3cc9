import CatalogModels
import Foundation
import Testing

/// The one rule for a viewer's progress, as server and devices apply it.
@Suite struct ProgressRulesTests {
    /// Three devices with skewed clocks, some heartbeats sent late from offline: applied in
    /// any order, they end in the same place (the latest playback's).
    @Test func everyOrderOfTheSameHeartbeatsEndsTheSame() {
        var generator = SystemRandomNumberGenerator()
        let item = CatalogID()
        let received = Date(timeIntervalSince1970: 1_800_000_000)
        for _ in 0..<200 {
            let skews = ["phone": -30.0, "tablet": 45.0, "tv": 0.0]
            var heartbeats: [ProgressInput] = []
            for (device, skew) in skews {
                var time = received.timeIntervalSince1970 - Double.random(in: 0...3600, using: &generator)
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    time += Double.random(in: 1...300, using: &generator)
                    heartbeats.append(
                        ProgressInput(
                            positionSeconds: Double(Int.random(in: 0...600, using: &generator)), durationSeconds: 600,
                            clientTime: Date(timeIntervalSince1970: time + skew), deviceId: device))
                }
            }
            var results: Set<[String]> = []
            for _ in 0..<6 {
                var state: PlaybackProgress?
                for heartbeat in heartbeats.shuffled(using: &generator) {
                    state = ProgressRules.apply(heartbeat, receivedAt: received, to: state, item: item, itemDuration: nil).progress
                }
                guard let state else { continue }
                results.insert(["\(state.positionSeconds)", "\(state.watchedAt.timeIntervalSince1970)", state.deviceId, "\(state.played)"])
            }
            #expect(results.count == 1, "\(results)")
        }
    }

    @Test func begunMeansBetweenFiveAndNinetyPercent() {
        func progress(_ seconds: Double, _ duration: Double?, played: Bool = false) -> PlaybackProgress {
            PlaybackProgress(
                playableItemId: CatalogID(), positionSeconds: seconds, durationSeconds: duration, played: played, playCount: 0, watchedAt: Date(),
                deviceId: "d", version: 1)
        }
        #expect(!ProgressRules.isBegun(progress(29, 600)) && ProgressRules.isBegun(progress(30, 600)))
        #expect(ProgressRules.isBegun(progress(539, 600)) && !ProgressRules.isBegun(progress(540, 600, played: true)))
        #expect(!ProgressRules.isBegun(progress(29, nil)) && ProgressRules.isBegun(progress(30, nil)))
    }
}
