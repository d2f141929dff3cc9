import CatalogIdentity
import CatalogModels
import CatalogOutbound
import CatalogStore
import Foundation

/// The sender's thread (``WebhookWorker``): its state is its own, never shared.
struct SenderLoop {
    /// An endpoint as the sender knows it.
    private struct Endpoint {
        var row: WebhookRow
        /// The keys it signs with now.
        var keys: [[UInt8]]
        /// Deliveries held and not yet sent.
        var queued: [ClaimedDelivery] = []
        var inFlight = 0
        /// When its next delivery not held here is due (milliseconds), if one waits.
        var nextDue: Int64?
        var held: Int { queued.count + inFlight }
        /// Whether it may take more: claims refill a half-empty hold, not each free slot.
        var hasRoom: Bool { held <= WebhookWorker.heldPerEndpoint / 2 }
    }

    let worker: WebhookWorker
    private var endpoints: [CatalogID: Endpoint] = [:]
    /// Requests in flight, by tag, with when each started.
    private var flying: [Int64: (delivery: ClaimedDelivery, startedAt: Int64)] = [:]
    private var nextTag: Int64 = 1
    private var outcomes: [DeliveryOutcome] = []
    private var firstOutcome = ContinuousClock.now
    private var refreshed = ContinuousClock.now - .seconds(3600)
    private var renewed = ContinuousClock.now
    private var bounded = ContinuousClock.now - .seconds(3600)
    private var purged = ContinuousClock.now
    /// The HTTP client, made when there is first an endpoint to send to.
    private var client: HTTPSender?

    init(worker: WebhookWorker) {
        self.worker = worker
    }

    private var settings: WebhookSettings { worker.settings }

    mutating func run() {
        while true {
            let room = endpoints.mapValues { WebhookWorker.heldPerEndpoint - $0.held }.filter { $0.value > 0 }
            let asked = worker.takeRequests(room: room)
            // Handed off but never sent when stopping: let go with the rest below.
            if asked.stopped { break }
            var requests = (all: asked.all, endpoints: asked.endpoints, stopped: false)
            let now = settings.clock()
            // Every few seconds: the endpoints read again, and each asked for what is due
            // (deliveries another replica let go, or whose lease ended, are found so).
            if requests.all || ContinuousClock.now - refreshed > .seconds(5) {
                refresh(now: now)
                requests.all = true
            }
            if client == nil, !endpoints.isEmpty {
                do { client = try worker.httpClient() } catch { WebhookWorker.log(error, doing: "starting libcurl") }
            }
            guard let client else {
                worker.idle(milliseconds: 1000)
                continue
            }
            take(asked.handedOff)
            claim(requests, now: now)
            startTransfers(client)
            // Until the next delivery due of an endpoint with room, a wakeup, or 250 ms.
            let due = endpoints.values.filter(\.hasRoom).compactMap(\.nextDue).min() ?? .max
            let wait = outcomes.isEmpty ? min(250, max(1, Int(clamping: due &- now))) : 5
            client.run(waitingAtMost: wait)
            collect(client)
            if !outcomes.isEmpty, outcomes.count >= 256 || ContinuousClock.now - firstOutcome > .milliseconds(20) { flush() }
            housekeeping()
        }
        // Stopping: what finished is recorded; what is held goes back for another to take.
        if let client { collect(client) }
        flush()
        do { try worker.queue.release(holder: worker.holder) } catch { WebhookWorker.log(error, doing: "letting deliveries go") }
    }

    /// Reads the enabled endpoints again: new ones join, changed ones take their new
    /// address and keys, and the deliveries held for those gone (deleted, disabled) go back.
    private mutating func refresh(now: Int64) {
        refreshed = .now
        let rows: [WebhookRow]
        do { rows = try worker.queue.enabledEndpoints() } catch {
            WebhookWorker.log(error, doing: "reading the endpoints")
            return
        }
        var next: [CatalogID: Endpoint] = [:]
        for row in rows {
            let keys: [[UInt8]]
            do { keys = try worker.secrets.keys(of: row, now: now) } catch {
                WebhookWorker.log(error, doing: "opening the secret of endpoint \(row.id)")
                continue
            }
            // One that left and came back still has its requests in flight.
            var endpoint = endpoints[row.id] ?? Endpoint(row: row, keys: keys, inFlight: flying.values.filter { $0.delivery.webhook == row.id }.count)
            endpoint.row = row
            endpoint.keys = keys
            next[row.id] = endpoint
        }
        let dropped = endpoints.filter { next[$0.key] == nil }.flatMap(\.value.queued).map(\.seq)
        do { try worker.queue.release(dropped, holder: worker.holder) } catch { WebhookWorker.log(error, doing: "letting deliveries go") }
        endpoints = next
    }

    /// Queues the deliveries the dispatcher made held for this sender; those of an
    /// endpoint it no longer sends to go back.
    private mutating func take(_ handedOff: [ClaimedDelivery]) {
        var unknown: [Int64] = []
        for delivery in handedOff {
            if endpoints[delivery.webhook] != nil { endpoints[delivery.webhook]?.queued.append(delivery) } else { unknown.append(delivery.seq) }
        }
        do { try worker.queue.release(unknown, holder: worker.holder) } catch { WebhookWorker.log(error, doing: "letting deliveries go") }
    }

    /// Claims due deliveries for the endpoints with room that may have some.
    private mutating func claim(_ requests: (all: Bool, endpoints: Set<CatalogID>, stopped: Bool), now: Int64) {
        let until = now + settings.leaseMilliseconds
        for id in Array(endpoints.keys) {
            guard var endpoint = endpoints[id], endpoint.hasRoom else { continue }
            let wanted = requests.all || requests.endpoints.contains(id) || (endpoint.nextDue.map { $0 <= now } ?? false)
            guard wanted else { continue }
            // What this sender holds already is never taken twice (an admin's retry of a
            // delivery in flight makes it due again without letting go of it).
            let held = Set(endpoint.queued.map(\.seq)).union(flying.values.filter { $0.delivery.webhook == id }.map(\.delivery.seq))
            do {
                let (claimed, nextDue) = try worker.queue.claim(
                    webhook: id, limit: WebhookWorker.heldPerEndpoint - endpoint.held, holder: worker.holder, until: until, now: now, excluding: held)
                endpoint.queued += claimed
                // Nothing due now: asked again when the next is, or in a second at the soonest.
                endpoint.nextDue = nextDue.map { claimed.isEmpty ? max($0, now + 1000) : $0 }
            } catch {
                WebhookWorker.log(error, doing: "claiming deliveries")
            }
            endpoints[id] = endpoint
        }
    }

    /// Starts requests for queued deliveries, at most ``WebhookWorker/maxInFlight`` per endpoint.
    private mutating func startTransfers(_ client: HTTPSender) {
        for id in Array(endpoints.keys) {
            guard var endpoint = endpoints[id] else { continue }
            while endpoint.inFlight < WebhookWorker.maxInFlight, !endpoint.queued.isEmpty {
                let delivery = endpoint.queued.removeFirst()
                let tag = nextTag
                nextTag += 1
                let request = HTTPSender.Request(
                    tag: tag, url: endpoint.row.url, headers: worker.headers(delivery, keys: endpoint.keys), body: delivery.body,
                    responseLimit: WebhookWorker.responseLimit, timeoutMilliseconds: settings.timeoutMilliseconds)
                let startedAt = settings.clock()
                if client.add(request) {
                    flying[tag] = (delivery, startedAt)
                    endpoint.inFlight += 1
                } else {
                    let outcome = WebhookWorker.outcome(delivery, startedAt: startedAt, .init(failure: "The request could not be started."))
                    record(outcome)
                    endpoint.nextDue = Self.due(endpoint.nextDue, after: outcome)
                }
            }
            endpoints[id] = endpoint
        }
    }

    /// Takes the outcomes of the requests that finished.
    private mutating func collect(_ client: HTTPSender) {
        while let result = client.next() {
            guard let (delivery, startedAt) = flying.removeValue(forKey: result.tag) else { continue }
            let outcome = WebhookWorker.outcome(delivery, startedAt: startedAt, result)
            record(outcome)
            if var endpoint = endpoints[delivery.webhook] {
                endpoint.inFlight = max(0, endpoint.inFlight - 1)
                endpoint.nextDue = Self.due(endpoint.nextDue, after: outcome)
                endpoints[delivery.webhook] = endpoint
            }
        }
    }

    /// Keeps `outcome` for the next flush.
    private mutating func record(_ outcome: DeliveryOutcome) {
        if outcomes.isEmpty { firstOutcome = .now }
        outcomes.append(outcome)
    }

    /// When an endpoint whose next delivery was due at `due` has one due next, after
    /// `outcome` (a retry is due again at its time).
    private static func due(_ due: Int64?, after outcome: DeliveryOutcome) -> Int64? {
        guard case let .retry(at) = outcome.next else { return due }
        return min(due ?? at, at)
    }

    /// Records the outcomes gathered, in one transaction; kept for the next round if that fails.
    private mutating func flush() {
        guard !outcomes.isEmpty else { return }
        do {
            let (recorded, disabled) = try worker.queue.record(outcomes, holder: worker.holder, now: settings.clock(), disableAfter: RetrySchedule.horizon)
            worker.counters.withLock { counters in
                for outcome in recorded {
                    let result =
                        switch outcome.next {
                        case .delivered: "delivered"
                        case .retry: "retrying"
                        case .failed: "failed"
                        }
                    counters.results[result, default: 0] += 1
                }
            }
            outcomes = []
            if !disabled.isEmpty {
                WebhookWorker.log(disabled: disabled)
                refreshed = .now - .seconds(3600)
            }
        } catch {
            WebhookWorker.log(error, doing: "recording deliveries")
        }
    }

    /// Renews the leases held (every third of a lease), bounds backlogs (every 5 s) and
    /// purges ended deliveries (every minute).
    private mutating func housekeeping() {
        let now = settings.clock()
        if ContinuousClock.now - renewed > .milliseconds(settings.leaseMilliseconds / 3) {
            renewed = .now
            let held = endpoints.values.flatMap(\.queued).map(\.seq) + flying.values.map(\.delivery.seq)
            do { try worker.queue.renew(held, holder: worker.holder, until: now + settings.leaseMilliseconds) } catch {
                WebhookWorker.log(error, doing: "renewing leases")
            }
        }
        if ContinuousClock.now - bounded > .seconds(5) {
            bounded = .now
            do {
                let (pending, dropped) = try worker.queue.bound(backlog: settings.backlog, now: now)
                worker.counters.withLock { counters in
                    counters.backlog = pending
                    if dropped > 0 { counters.results["dropped", default: 0] += UInt64(dropped) }
                }
            } catch {
                WebhookWorker.log(error, doing: "bounding backlogs")
            }
        }
        if ContinuousClock.now - purged > .seconds(60) {
            purged = .now
            do { _ = try worker.queue.purge(endedBefore: now - WebhookWorker.keptFor, keep: WebhookWorker.keptPerEndpoint) } catch {
                WebhookWorker.log(error, doing: "purging ended deliveries")
            }
        }
    }
}

extension HTTPSender.Outcome {
    /// An attempt that never left.
    init(failure: String) {
        self.init(tag: 0, status: nil, body: [], durationMicroseconds: 0, error: failure)
    }
}
