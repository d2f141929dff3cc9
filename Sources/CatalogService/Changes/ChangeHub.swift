import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Logging

/// Where long-polls wait and event streams listen for new changes, without a thread or a
/// database poll each: one thread sleeps until a commit fires (``CommitSignal``), reads
/// the log's high-water mark once, and reads the new changes once for every group of
/// readers at the same place with the same filter, then gives each reader what it may see.
/// It also ends overdue long-polls, beats the streams' hearts and purges old deletions.
final class ChangeHub: @unchecked Sendable {
    /// A long-poll waiting for a change.
    struct Waiter {
        var after: Int64
        let filter: ChangeFilter
        let viewer: Viewer
        let limit: Int
        /// When to answer with an empty page (monotonic milliseconds).
        let deadline: Int64
        let isAbandoned: @Sendable () -> Bool
        /// Answers with the changes after `after` (up to the next token), and whether more follow.
        let answer: @Sendable ([ChangeRecord.Delivery], Int64, Bool) -> Void
    }

    /// An event stream.
    struct Subscriber {
        var after: Int64
        let filter: ChangeFilter
        let viewer: Viewer
        let stream: ResponseStream
        var lastSent: Int64
        /// When it was added (monotonic milliseconds).
        let started: Int64
        /// Since when its client has read nothing while it was behind, if it is.
        var stalled: (since: Int64, unsent: Int)? = nil
        /// Changes as the stream's events.
        let events: @Sendable ([ChangeRecord.Delivery]) -> [UInt8]
    }

    /// A page of changes by the very values it holds (the buffers of their JSON, which
    /// readers who see a change whole share): streams given the same page in a round share
    /// one formatting of it, so a change fanned out to thousands of streams is formatted once.
    private struct PageIdentity: Hashable {
        let buffers: [Int]

        init(_ changes: [ChangeRecord.Delivery]) {
            buffers = changes.flatMap { change in [Int(change.seq), change.json.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) }] }
        }
    }

    /// The most long-polls and streams at once; past it a new one gets 503.
    static let capacity = 20_000
    /// How often a quiet stream gets a comment, so proxies keep it open.
    static let heartbeat: Int64 = 15_000
    /// The most changes a round gives one reader (more follow in the next round).
    static let roundLimit = 500
    static let roundBytes = 256 * 1024
    /// How often old deletions are purged.
    static let purgeInterval: Int64 = 3_600_000
    /// How long a stream lasts before it is ended cleanly, so that its client reconnects
    /// (with `Last-Event-ID`) and its credential and role are checked again.
    static let streamLifetime: Int64 = 600_000
    /// How long a stream's client may read nothing while it is behind before it is cut off.
    static let stallLimit: Int64 = 30_000
    /// How long a stream may wait for its connection to take it (its client may have gone).
    static let attachLimit: Int64 = 10_000
    /// The most reads of the log one round makes; readers past them wait for the next round.
    static let readsPerRound = 64

    private let log: any ChangeSource
    private let retention: Duration
    private let isShuttingDown: @Sendable () -> Bool
    private let logger = Logger(label: "catalog.changes")
    private let condition = NSCondition()
    private var waiters: [UInt64: Waiter] = [:]
    private var subscribers: [UInt64: Subscriber] = [:]
    private var nextID: UInt64 = 0
    private var signalled = true
    private var stopped = false
    private var nextPurge: Int64 = 0

    /// The unsent bytes the event streams share; `nil`: none.
    private let streamBudget: StreamBudget?

    init(log: any ChangeSource, retention: Duration, streamBudget: StreamBudget? = nil, isShuttingDown: @escaping @Sendable () -> Bool) {
        self.log = log
        self.streamBudget = streamBudget
        self.retention = retention
        self.isShuttingDown = isShuttingDown
        log.commits.observe { [weak self] in self?.signal() }
        let thread = Thread { [weak self] in self?.run() }
        thread.name = "catalog-changes"
        thread.start()
    }

    /// Long-polls and streams now.
    var counts: (waiters: Int, streams: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (waiters.count, subscribers.count)
    }

    /// Wakes the hub: something committed, or a stream drained. With nobody waiting, the
    /// news is only noted (a reader added later looks anyway): commits cost no wake-up.
    func signal() {
        condition.lock()
        signalled = true
        if !waiters.isEmpty || !subscribers.isEmpty { condition.signal() }
        condition.unlock()
    }

    /// Parks a long-poll. - Returns: false when the hub is full.
    func park(_ waiter: Waiter) -> Bool {
        add { id in waiters[id] = waiter }
    }

    /// Adds an event stream, which then receives every change after `subscriber.after`.
    /// - Returns: false when the hub is full.
    func subscribe(_ subscriber: Subscriber) -> Bool {
        subscriber.stream.onDrain { [weak self] in self?.signal() }
        return add { id in subscribers[id] = subscriber }
    }

    private func add(_ insert: (UInt64) -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard waiters.count + subscribers.count < Self.capacity, !stopped else { return false }
        nextID &+= 1
        insert(nextID)
        // A commit may have come between the reader's last read and now: look again.
        signalled = true
        condition.signal()
        return true
    }

    /// Stops the hub's thread (the streams end with their connections).
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    // MARK: The hub's thread

    private func run() {
        ReadBudget.allow(ChangeFeed.allowance)
        var highWater: Int64 = 0
        /// The high-water mark of the last round that read it.
        var seen: Int64 = 0
        while true {
            condition.lock()
            let wake = Date(timeIntervalSinceNow: 1)
            while !signalled && !stopped {
                if !condition.wait(until: wake) { break }
            }
            if stopped {
                let parked = waiters
                waiters = [:]
                condition.unlock()
                for waiter in parked.values { waiter.answer([], waiter.after, false) }
                return
            }
            signalled = false
            var parked = waiters
            var listening = subscribers
            condition.unlock()

            let now = MonotonicClock.milliseconds()
            // After each commit, and once a second, while anyone waits: a missed notification
            // (a lost listener connection) delays a change by a second at most.
            var quiet: (@Sendable (ChangeFilter, Int64) -> Bool)?
            if !parked.isEmpty || !listening.isEmpty {
                do {
                    highWater = try log.highWater()
                    quiet = try quietReaders(after: seen, through: highWater)
                    seen = highWater
                } catch { logger.warning("cannot read the change log: \(error)") }
            }
            let (parkedIDs, listeningIDs) = (Array(parked.keys), Array(listening.keys))
            deliver(to: &parked, &listening, highWater: highWater, quiet: quiet ?? { _, _ in false }, now: now, shuttingDown: isShuttingDown())
            condition.lock()
            // Readers added meanwhile stay; those answered or gone leave.
            for id in parkedIDs { waiters[id] = parked[id] }
            for id in listeningIDs { subscribers[id] = listening[id] }
            condition.unlock()
            purgeIfDue(now)
        }
    }

    /// The most changes since the last round whose readers are looked up rather than read
    /// one by one (more: every reader reads, as in a first round).
    static let touchedLimit: Int64 = 10_000

    /// Which readers (a filter, and where it is) have nothing new between `seen` and `top`,
    /// when the log knows whose changes those are (a viewer's own): a reader that had seen
    /// everything through `seen` and whose viewer changed nothing since is at `top`
    /// without a read. `nil`: any reader may have changes.
    private func quietReaders(after seen: Int64, through top: Int64) throws(StoreError) -> (@Sendable (ChangeFilter, Int64) -> Bool)? {
        guard seen > 0, top > seen, top - seen <= Self.touchedLimit, let touched = try log.touched(after: seen, through: top) else { return nil }
        return { filter, after in
            guard let user = filter.user else { return false }
            return after >= seen && !touched.contains(user)
        }
    }

    /// Gives each reader the changes it has not had: one read per group of readers at the
    /// same place with the same filter; readers `quiet` says have nothing new move to
    /// `highWater` without one.
    private func deliver(
        to parked: inout [UInt64: Waiter], _ listening: inout [UInt64: Subscriber], highWater: Int64, quiet: (ChangeFilter, Int64) -> Bool, now: Int64,
        shuttingDown: Bool
    ) {
        var batches: [BatchKey: Result<ChangeBatch, StoreError>] = [:]
        var formatted: [PageIdentity: [UInt8]] = [:]
        var again = false
        /// The changes after `after` matching `filter`, read once per round; `nil` past the round's reads.
        func batch(after: Int64, filter: ChangeFilter) -> Result<ChangeBatch, StoreError>? {
            let key = BatchKey(after: after, filter: filter)
            if let batch = batches[key] { return batch }
            guard batches.count < Self.readsPerRound else {
                again = true
                return nil
            }
            let batch = Result { () throws(StoreError) -> ChangeBatch in
                try log.read(after: after, filter: filter, viewer: nil, limit: ChangeLog.maxReadLimit, maxBytes: Self.roundBytes)
            }
            switch batch {
            case .success, .failure(.syncTokenExpired): break
            case let .failure(error): logger.warning("cannot read the change log: \(error)")
            }
            batches[key] = batch
            return batch
        }
        for (id, waiter) in parked {
            if waiter.isAbandoned() {
                parked[id] = nil
                continue
            }
            if waiter.after < highWater, quiet(waiter.filter, waiter.after) {
                parked[id]?.after = highWater
            } else if waiter.after < highWater, let batch = batch(after: waiter.after, filter: waiter.filter) {
                switch batch {
                case let .success(batch):
                    let page = batch.page(for: waiter.viewer, limit: waiter.limit, maxBytes: Self.roundBytes)
                    if !page.changes.isEmpty || page.hasMore {
                        waiter.answer(page.changes, page.next, page.hasMore)
                        parked[id] = nil
                        continue
                    }
                    parked[id]?.after = page.next
                case .failure(.syncTokenExpired):
                    // Deletions were purged under it: its next request learns so (410).
                    waiter.answer([], waiter.after, false)
                    parked[id] = nil
                    continue
                case .failure:
                    break
                }
            }
            if shuttingDown || now >= waiter.deadline {
                waiter.answer([], parked[id]?.after ?? waiter.after, false)
                parked[id] = nil
            }
        }
        for (id, subscriber) in listening {
            let stream = subscriber.stream
            if stream.isClosed {
                listening[id] = nil
                continue
            }
            if !stream.isAttached {
                // Its response never reached a connection (the client went first): forget it.
                if now - subscriber.started > Self.attachLimit {
                    stream.cancel()
                    listening[id] = nil
                }
                continue
            }
            if now - subscriber.started > Self.streamLifetime {
                stream.finish()
                listening[id] = nil
                continue
            }
            let unsent = stream.unsentBytes
            if unsent > stream.limit / 4 {
                // The client is behind: nothing more until it drains (the stream wakes the
                // hub), and it is cut off if it reads nothing for a while.
                if let stalled = subscriber.stalled, unsent >= stalled.unsent {
                    if now - stalled.since > Self.stallLimit {
                        stream.cancel()
                        listening[id] = nil
                        continue
                    }
                } else {
                    listening[id]?.stalled = (now, unsent)
                }
                stream.wantDrain()
                continue
            }
            listening[id]?.stalled = nil
            if subscriber.after < highWater, quiet(subscriber.filter, subscriber.after) {
                listening[id]?.after = highWater
                if now - subscriber.lastSent >= Self.heartbeat {
                    stream.send(ChangeFeed.heartbeat)
                    listening[id]?.lastSent = now
                }
            } else if subscriber.after < highWater, let batch = batch(after: subscriber.after, filter: subscriber.filter) {
                switch batch {
                case let .success(batch):
                    let page = batch.page(for: subscriber.viewer, limit: Self.roundLimit, maxBytes: Self.roundBytes)
                    // The streams' shared budget: past it, this stream waits for a later round
                    // (the streams furthest behind are cut to make room), rather than the
                    // server holding more.
                    let size = page.changes.reduce(0) { $0 + $1.json.count + 128 }
                    if !page.changes.isEmpty, let budget = streamBudget, !budget.admits(size), !budget.makeRoom(for: size) { continue }
                    if !page.changes.isEmpty {
                        let identity = PageIdentity(page.changes)
                        let events = formatted[identity] ?? subscriber.events(page.changes)
                        formatted[identity] = events
                        stream.send(events)
                        listening[id]?.lastSent = now
                    }
                    listening[id]?.after = page.next
                    again = again || page.hasMore
                case .failure(.syncTokenExpired):
                    // Its reconnection (with Last-Event-ID) gets the 410.
                    stream.finish()
                    listening[id] = nil
                case .failure:
                    break
                }
            } else if now - subscriber.lastSent >= Self.heartbeat {
                stream.send(ChangeFeed.heartbeat)
                listening[id]?.lastSent = now
            }
        }
        if again { signal() }
    }

    private struct BatchKey: Hashable {
        let after: Int64
        let filter: ChangeFilter
    }

    private func purgeIfDue(_ now: Int64) {
        guard now >= nextPurge else { return }
        nextPurge = now + Self.purgeInterval
        let cutoff = Int64(Date().timeIntervalSince1970 * 1000) - retention.components.seconds * 1000
        log.purge(before: cutoff) { [logger] result in
            switch result {
            case let .success(count) where count > 0: logger.info("purged \(count) deletions older than the change retention")
            case .success: break
            case let .failure(error): logger.warning("cannot purge the change log: \(error)")
            }
        }
    }
}
