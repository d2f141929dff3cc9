import Testing

@testable import HTTPServer

/// The rules of a connection's deadlines, driven with made-up times: no socket, no clock,
/// no sleep. (`TimeoutTests` shows over real sockets that connections follow them.)
@Suite struct ConnectionDeadlinesTests {
    static let timeouts = ConnectionDeadlines.Timeouts(head: 10_000, body: 30_000, request: 60_000, keepAlive: 5_000, linger: 2_000)

    /// Every time from `from` to `to` (inclusive) at which something is due, with what.
    static func dues(_ deadlines: inout ConnectionDeadlines, from: Int64, to: Int64, step: Int64 = 1) -> [(Int64, ConnectionDeadlines.Due)] {
        var found: [(Int64, ConnectionDeadlines.Due)] = []
        var now = from
        while now <= to {
            if let due = deadlines.due(at: now) { found.append((now, due)) }
            now += step
        }
        return found
    }

    @Test func aSilentNewConnectionIsClosedWithoutAnAnswerAtTheHeadTimeout() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 1_000)
        #expect(deadlines.due(at: 10_999) == nil)
        #expect(deadlines.due(at: 11_000) == .expired(.close))
        // Once: the connection is closing.
        #expect(deadlines.due(at: 11_001) == nil)
    }

    @Test func aHeadHasTheHeadTimeoutFromItsFirstByteAndIsAnswered408() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.headBegan(at: 4_000, continuesFirst: false)
        let dues = Self.dues(&deadlines, from: 0, to: 20_000, step: 500)
        #expect(dues.map(\.0) == [14_000])
        #expect(dues.map(\.1) == [.expired(.fail(.head))])
    }

    @Test func aTLSConnectionsFirstHeadKeepsTheTimeSinceTheConnectionOpened() {
        // The handshake counts: a client that handshakes slowly cannot then trickle a head.
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.headBegan(at: 9_000, continuesFirst: true)
        #expect(deadlines.due(at: 9_999) == nil)
        #expect(deadlines.due(at: 10_000) == .expired(.fail(.head)))
    }

    @Test func aBodyHasTheBodyTimeoutFromItsHead() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.headBegan(at: 0, continuesFirst: false)
        deadlines = deadlines.bodyBegan(at: 9_000)
        #expect(deadlines.due(at: 38_999) == nil, "the head's deadline no longer applies")
        #expect(deadlines.due(at: 39_000) == .expired(.fail(.body)))
    }

    @Test func aDeferredAnswerExpiresAtTheRequestTimeoutOrItsRoutesOwn() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.awaitingAnswer(at: 1_000, timeout: nil)
        #expect(deadlines.due(at: 60_999) == nil)
        #expect(deadlines.due(at: 61_000) == .expired(.expire))
        deadlines = deadlines.awaitingAnswer(at: 100_000, timeout: 300_000)
        #expect(deadlines.due(at: 399_999) == nil)
        #expect(deadlines.due(at: 400_000) == .expired(.expire))
    }

    @Test func afterAResponseTheConnectionIdlesForTheKeepAliveTimeoutOrTheNextHeadHasTheHeadTimeout() {
        var idle = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        idle = idle.awaitingAnswer(at: 0, timeout: nil)
        idle = idle.responded(at: 2_000, nextBegan: false)
        #expect(Self.dues(&idle, from: 2_000, to: 100_000, step: 100).map(\.0) == [7_000])
        var pipelined = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        pipelined = pipelined.responded(at: 2_000, nextBegan: true)
        #expect(pipelined.due(at: 12_000) == .expired(.fail(.head)))
    }

    @Test func lingeringEndsAtTheLingerTimeout() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.lingering(at: 50_000)
        #expect(deadlines.due(at: 51_999) == nil)
        #expect(deadlines.due(at: 52_000) == .expired(.close))
    }

    @Test func aStreamOrAFinalErrorHasNoPhaseDeadlineOnlyTheWrites() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.clearingPhase()
        #expect(Self.dues(&deadlines, from: 0, to: 1_000_000, step: 1_000).isEmpty)
        deadlines = deadlines.writeBlocked(at: 5_000)
        #expect(deadlines.due(at: 35_000) == .writeStalled)
    }

    @Test func aWriteWithoutProgressClosesAfterTheBodyTimeoutAndProgressRestartsIt() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.clearingPhase()
        deadlines = deadlines.writeBlocked(at: 1_000)
        // Blocking again does not move the bound: it counts from the first block.
        deadlines = deadlines.writeBlocked(at: 20_000)
        #expect(deadlines.due(at: 30_999) == nil)
        #expect(deadlines.due(at: 31_000) == .writeStalled)
        // Progress stops it; the next block starts it again.
        deadlines = deadlines.wrote()
        #expect(deadlines.due(at: 40_000) == nil)
        deadlines = deadlines.writeBlocked(at: 40_000)
        #expect(deadlines.due(at: 69_999) == nil)
        #expect(deadlines.due(at: 70_000) == .writeStalled)
    }

    @Test func aStalledWriteComesBeforeThePhasesDeadline() {
        var deadlines = ConnectionDeadlines(Self.timeouts, openedAt: 0)
        deadlines = deadlines.awaitingAnswer(at: 0, timeout: 30_000)
        deadlines = deadlines.writeBlocked(at: 0)
        #expect(deadlines.due(at: 30_000) == .writeStalled)
    }
}
