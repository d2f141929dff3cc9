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
        /// When its next delivery that no one holds is due (milliseconds), if one waits.
        var nextDue: Int64?
        var held: Int { queued.count + inFlight }
    }

    let worker: WebhookWorker
    private var endpoints: [CatalogID: Endpoint] = [:]
    /// Requests in flight, by tag (the delivery's `seq`), with when each started.
    private var flying: [Int64: (delivery: ClaimedDelivery, startedAt: Int64)] = [:]
    private var outcomes: [DeliveryOutcome] = []
    private var firstOutcome = ContinuousClock.now
    private var refreshed = ContinuousClock.now - .seconds(3600)
    private var renewed = ContinuousClock.now
    private var bounded = ContinuousClock.now - .seconds(3600)
    private var purged = ContinuousClock.now

    init(worker: WebhookWorker) {
        self.worker = worker
    }

    private var settings: WebhookSettings { worker.settings }

    mutating func run() {
        while true {
            let requests = worker.takeClaimRequests()
            if requests.stopped { break }
            let now = settings.clock()
            if requests.all || ContinuousClock.now - refreshed > .seconds(5) { refresh(now: now) }
            claim(requests, now: now)
            startTransfers()
            let wait = outcomes.isEmpty ? min(250, max(0, Int((endpoints.values.compactMap(\.nextDue).min() ?? .max) &- now))) : 5
            worker.sender.run(waitingAtMost: max(wait, 1))
            collect()
            if !outcomes.isEmpty, outcomes.count >= 256 || ContinuousClock.now - firstOutcome > .milliseconds(20) { flush() }
            housekeeping()
        }
        // Stopping: what finished is recorded; what is held goes back for another to take.
        collect()
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
            var endpoint = endpoints[row.id] ?? Endpoint(row: row, keys: keys)
            endpoint.row = row
            endpoint.keys = keys
            next[row.id] = endpoint
        }
        let dropped = endpoints.filter { next[$0.key] == nil }.flatMap(\.value.queued).map(\.seq)
        do { try worker.queue.release(dropped, holder: worker.holder) } catch { WebhookWorker.log(error, doing: "letting deliveries go") }
        endpoints = next
    }

    /// Claims due deliveries for the endpoints with room that may have some.
    private mutating func claim(_ requests: (all: Bool, endpoints: Set<CatalogID>, stopped: Bool), now: Int64) {
        let until = now + settings.leaseMilliseconds
        for id in Array(endpoints.keys) {
            guard var endpoint = endpoints[id], endpoint.held < WebhookWorker.heldPerEndpoint else { continue }
            let wanted = requests.all || requests.endpoints.contains(id) || (endpoint.nextDue.map { $0 <= now } ?? false)
            guard wanted else { continue }
            do {
                let (claimed, nextDue) = try worker.queue.claim(
                    webhook: id, limit: WebhookWorker.heldPerEndpoint - endpoint.held, holder: worker.holder, until: until, now: now)
                endpoint.queued += claimed
                // Due already but not taken (no room): asked again once room is made.
                endpoint.nextDue = nextDue.map { max($0, now + (claimed.isEmpty ? 1000 : 0)) }
            } catch {
                WebhookWorker.log(error, doing: "claiming deliveries")
            }
            endpoints[id] = endpoint
        }
    }

    /// Starts requests for queued deliveries, at most ``WebhookWorker/maxInFlight`` per endpoint.
    private mutating func startTransfers() {
        for id in Array(endpoints.keys) {
            guard var endpoint = endpoints[id] else { continue }
            while endpoint.inFlight < WebhookWorker.maxInFlight, !endpoint.queued.isEmpty {
                let delivery = endpoint.queued.removeFirst()
                let request = HTTPSender.Request(
                    tag: delivery.seq, url: endpoint.row.url, headers: worker.headers(delivery, keys: endpoint.keys), body: delivery.body,
                    responseLimit: WebhookWorker.responseLimit, timeoutMilliseconds: settings.timeoutMilliseconds)
                let startedAt = settings.clock()
                if worker.sender.add(request) {
                    flying[delivery.seq] = (delivery, startedAt)
                    endpoint.inFlight += 1
                } else {
                    record(WebhookWorker.outcome(delivery, startedAt: startedAt, .init(failure: "The request could not be started.")))
                }
            }
            endpoints[id] = endpoint
        }
    }

    /// Takes the outcomes of the requests that finished.
    private mutating func collect() {
        while let result = worker.sender.next() {
            guard let (delivery, startedAt) = flying.removeValue(forKey: result.tag) else { continue }
            endpoints[delivery.webhook]?.inFlight -= 1
            record(WebhookWorker.outcome(delivery, startedAt: startedAt, result))
        }
    }

    private mutating func record(_ outcome: DeliveryOutcome) {
        if outcomes.isEmpty { firstOutcome = .now }
        outcomes.append(outcome)
        let result =
            switch outcome.next {
            case .delivered: "delivered"
            case .retry: "retrying"
            case .failed: "failed"
            }
        worker.counters.withLock { $0.results[result, default: 0] += 1 }
    }

    /// Records the outcomes gathered, in one transaction; kept for the next round if that fails.
    private mutating func flush() {
        guard !outcomes.isEmpty else { return }
        do {
            let disabled = try worker.queue.record(outcomes, holder: worker.holder, now: settings.clock(), disableAfter: RetrySchedule.horizon)
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
            let held = endpoints.values.flatMap(\.queued).map(\.seq) + Array(flying.keys)
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
        self.init(tag: 0, status: nil, body: [], durationMicroseconds: 0, error: failure, refused: false)
    }
}
