import CLinux
import CatalogIdentity
import CatalogModels
import CatalogOutbound
import CatalogStore
import Foundation
import Logging
import Synchronization

/// How webhooks are delivered: the limits an operator sets, and the clock (a test's own).
struct WebhookSettings: Sendable {
    /// How long one attempt may take.
    var timeoutMilliseconds = 10_000
    /// The most deliveries that wait per endpoint; past it the oldest are dropped.
    var backlog = 10_000
    /// How long a claim on a delivery lasts unless renewed.
    var leaseMilliseconds: Int64 = 60_000
    /// Milliseconds since 1970: when attempts are due and made.
    var clock: @Sendable () -> Int64 = { Timestamp.milliseconds(Date()) }
}

/// Sends webhooks, on two threads of its own (never an event loop's):
/// - the **dispatcher** wakes at each commit, turns the events the change log's trigger
///   wrote into messages (each body rendered once, with its stable `webhook-id`) and one
///   delivery per matching endpoint, in one transaction that deletes the events;
/// - the **sender** claims due deliveries per endpoint (leases, renewed while held),
///   keeps at most ``maxInFlight`` requests in flight per endpoint through one
///   ``HTTPSender`` (so a slow endpoint holds its own slots and no one else's), signs each
///   attempt, records outcomes in batches with the next attempt (``RetrySchedule``),
///   bounds each endpoint's backlog and purges what ended long ago.
final class WebhookWorker: Sendable {
    /// Requests in flight per endpoint, and deliveries a sender holds per endpoint.
    static let maxInFlight = 4
    static let heldPerEndpoint = 32
    /// The most bytes of an answer read and kept.
    static let responseLimit = 4096
    /// The threads that read the database (the dispatcher and the sender): the store's
    /// pool has a connection for each, so that they never hold one a loop waits for.
    static let readingThreads = 2
    /// Their nice value: deliveries are background work, and a server short of CPU serves
    /// its requests first (messages wait in the database meanwhile).
    static let niceness: Int32 = 19
    /// How many events one dispatch takes.
    static let dispatchBatch = 200
    /// How long ended deliveries are kept, and how many per endpoint at most.
    static let keptFor: Int64 = 7 * 86_400_000
    static let keptPerEndpoint = 10_000
    private static let logger = Logger(label: "catalog.webhooks")

    let changes: ChangeLog
    let queue: WebhookQueue
    let secrets: WebhookSecrets
    /// Makes the sender's HTTP client, when there is first an endpoint to send to: libcurl
    /// (and what it loads) is not mapped by a server without webhooks.
    let makeSender: @Sendable () throws -> HTTPSender
    /// The sender's HTTP client once made (woken through it while it waits on transfers).
    private let client = Mutex<HTTPSender?>(nil)
    /// Wakes the sender while it has no HTTP client.
    private let idleWake = DispatchSemaphore(value: 0)
    let settings: WebhookSettings
    /// This server's name on the leases it takes.
    let holder: String
    let userAgent: String

    private struct State {
        var stopped = false
        var started = false
        /// Whether commits came since the dispatcher last looked.
        var dispatchWanted = true
        /// Endpoints with new deliveries (or all, after a retry or a wake).
        var claimWanted: Set<CatalogID> = []
        var claimAll = true
        /// How many more deliveries the sender would hold, by endpoint it sends to.
        var room: [CatalogID: Int] = [:]
        /// Deliveries the dispatcher made held by this server, for the sender to send.
        var handedOff: [ClaimedDelivery] = []
    }

    private let state = Mutex(State())
    private let dispatcherWake = DispatchSemaphore(value: 0)
    private let running = DispatchGroup()
    let counters = Mutex(WebhookCounters())

    init(
        changes: ChangeLog, queue: WebhookQueue, secrets: WebhookSecrets, makeSender: @escaping @Sendable () throws -> HTTPSender, settings: WebhookSettings,
        holder: String, version: String
    ) {
        self.changes = changes
        self.queue = queue
        self.secrets = secrets
        self.makeSender = makeSender
        self.settings = settings
        self.holder = holder
        userAgent = "Catalog-Webhooks/\(version)"
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    /// Starts the dispatcher and the sender.
    func start() {
        let first = state.withLock { state in
            defer { state.started = true }
            return !state.started && !state.stopped
        }
        guard first else { return }
        changes.commits.observe { [self] in
            let wake = state.withLock { state in
                defer { state.dispatchWanted = true }
                return !state.dispatchWanted
            }
            if wake { dispatcherWake.signal() }
        }
        running.enter()
        let dispatcher = Thread { [self] in
            _ = clinux_lower_thread_priority(Self.niceness)
            // The generation in which the dispatcher last found nothing more to do: until it
            // moves, nothing has committed, so the next look would read nothing new.
            var idle: UInt64?
            while !isStopped {
                state.withLock { $0.dispatchWanted = false }
                var more = false
                let generation = queue.generation()
                if generation == nil || generation != idle {
                    do {
                        more = try dispatchOnce()
                        idle = more ? nil : generation
                    } catch { Self.logger.warning("Making webhook messages failed: \(error)") }
                }
                if !more { _ = dispatcherWake.wait(timeout: .now() + 1) }
            }
            running.leave()
        }
        dispatcher.name = "webhook-dispatcher"
        dispatcher.start()
        running.enter()
        let sending = Thread { [self] in
            _ = clinux_lower_thread_priority(Self.niceness)
            var loop = SenderLoop(worker: self)
            loop.run()
            running.leave()
        }
        sending.name = "webhook-sender"
        sending.start()
    }

    /// Stops both threads (waiting at most 15 s for them); what the sender held is let go.
    func stop() {
        let started = state.withLock { state in
            state.stopped = true
            return state.started
        }
        guard started else { return }
        dispatcherWake.signal()
        wakeSender()
        _ = running.wait(timeout: .now() + 15)
    }

    /// Wakes the sender to look for due deliveries of every endpoint now (after a retry,
    /// an endpoint's change, or a test's clock moved on).
    func wake() {
        state.withLock { $0.claimAll = true }
        wakeSender()
    }

    /// Wakes the dispatcher and the sender (``wake()``) at once.
    func wakeAll() {
        state.withLock { $0.dispatchWanted = true }
        dispatcherWake.signal()
        wake()
    }

    /// Ends the sender's wait, on its HTTP client or, before it has one, on its own.
    private func wakeSender() {
        if let current = client.withLock({ $0 }) { current.wakeup() } else { idleWake.signal() }
    }

    /// The sender's HTTP client, made the first time it is needed.
    func httpClient() throws -> HTTPSender {
        if let current = client.withLock({ $0 }) { return current }
        let made = try makeSender()
        client.withLock { $0 = made }
        return made
    }

    /// Waits (at most `milliseconds`) to be woken, while the sender has no HTTP client.
    func idle(milliseconds: Int) {
        _ = idleWake.wait(timeout: .now() + .milliseconds(milliseconds))
    }

    /// What the sender is asked to do now (taking the requests): the endpoints to claim
    /// for, and the deliveries handed to it; it tells in turn how many more it would hold
    /// of each endpoint (`room`).
    func takeRequests(room: [CatalogID: Int]) -> (all: Bool, endpoints: Set<CatalogID>, handedOff: [ClaimedDelivery], stopped: Bool) {
        state.withLock { state in
            defer {
                state.claimAll = false
                state.claimWanted = []
                state.handedOff = []
                state.room = room
            }
            return (state.claimAll, state.claimWanted, state.handedOff, state.stopped)
        }
    }

    // MARK: Dispatching

    /// Turns the oldest events waiting into messages and deliveries. - Returns: whether
    /// more may wait.
    @discardableResult
    func dispatchOnce() throws -> Bool {
        let events = try queue.events(limit: Self.dispatchBatch)
        guard !events.isEmpty else { return false }
        let endpoints = try queue.enabledEndpoints()
        let bodies = try changes.webhookBodies(events)
        let batch = events.map { event in
            let targets = endpoints.filter { $0.eventsAfter < event.seq && WebhookEventType.matches($0.eventTypes, event.eventType) }
            return WebhookDispatch(
                event: event.seq,
                message: targets.isEmpty ? nil : (Self.messageID(), event.eventType, bodies[event.seq] ?? []),
                deliveries: targets.map { (CatalogID(), $0.id) })
        }
        // What the sender has room for is made its own here: sent without a claim's round trip.
        let room = state.withLock { state in
            defer { state.room = [:] }
            return state.room
        }
        let now = settings.clock()
        let (touched, handedOff) = try queue.dispatch(batch, now: now, handOff: room, holder: holder, until: now + settings.leaseMilliseconds)
        if !touched.isEmpty {
            state.withLock { state in
                state.claimWanted.formUnion(touched.subtracting(handedOff.map(\.webhook)))
                state.handedOff += handedOff
            }
            wakeSender()
        }
        return events.count == Self.dispatchBatch
    }

    /// A new message's `webhook-id`: `msg_` and 128 random bits.
    static func messageID() -> String {
        "msg_" + CatalogID().rawValue.replacingOccurrences(of: "-", with: "")
    }

    // MARK: Sending

    /// The header lines of an attempt of `delivery` to an endpoint whose signing keys are
    /// `keys` (the current one, and the previous one during a rotation's overlap).
    func headers(_ delivery: ClaimedDelivery, keys: [[UInt8]]) -> [String] {
        let timestamp = Int64(Date().timeIntervalSince1970)
        let signatures = keys.map { WebhookSigning.signature(key: $0, id: delivery.messageID, timestamp: timestamp, body: delivery.body) }
        return [
            "Content-Type: application/json", "User-Agent: \(userAgent)", "webhook-id: \(delivery.messageID)", "webhook-timestamp: \(timestamp)",
            "webhook-signature: \(signatures.joined(separator: " "))", "Expect:",
        ]
    }

    /// The outcome of an attempt of `delivery` started at `startedAt` that came to `result`.
    static func outcome(_ delivery: ClaimedDelivery, startedAt: Int64, _ result: HTTPSender.Outcome) -> DeliveryOutcome {
        var error = result.error
        if let status = result.status, !(200..<300).contains(status) {
            error = "HTTP \(status)" + ((300..<400).contains(status) ? " (redirects are not followed)" : "")
        }
        let next = RetrySchedule.next(
            status: result.status, attemptedAt: startedAt, first: delivery.firstAttempt ?? startedAt, random: Double.random(in: 0..<1))
        return DeliveryOutcome(
            delivery: delivery, attemptedAt: startedAt, status: result.status, durationMilliseconds: Int(result.durationMicroseconds / 1000), error: error,
            response: result.body.isEmpty ? nil : result.body, next: next)
    }

    static func log(disabled: [CatalogID]) {
        for id in disabled {
            logger.warning("Webhook endpoint \(id) was disabled: every attempt to reach it failed for three days (enable it again with PATCH).")
        }
    }

    static func log(_ error: any Error, doing what: String) {
        logger.warning("Webhooks: \(what) failed: \(error)")
    }
}

/// What ``WebhookWorker`` counts for `/metrics`.
struct WebhookCounters: Sendable {
    /// Attempts by result: `delivered`, `retrying` (failed, tried again later), `failed`
    /// (no more attempts), and messages `dropped` unsent.
    var results: [String: UInt64] = [:]
    /// Deliveries waiting, by endpoint, as last counted.
    var backlog: [CatalogID: Int] = [:]
}

/// The signing secrets of endpoints, sealed at rest with the server's webhook key.
struct WebhookSecrets: Sendable {
    let box: SecretBox

    /// A new secret for the endpoint `id`: its text (shown once) and its sealed key (stored).
    func make(for id: CatalogID) throws -> (text: String, sealed: [UInt8]) {
        let secret = try WebhookSigning.newSecret()
        return (secret.text, try box.seal(secret.key, context: id.rawValue))
    }

    /// The keys `row` signs with at `now`: its secret's, and during a rotation's overlap
    /// the previous one's.
    func keys(of row: WebhookRow, now: Int64) throws -> [[UInt8]] {
        var keys = [try box.open(row.secret, context: row.id.rawValue)]
        if let previous = row.previousSecret, let until = row.previousSecretExpires, until > now {
            keys.append(try box.open(previous, context: row.id.rawValue))
        }
        return keys
    }
}
