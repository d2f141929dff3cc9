import CatalogModels
import Foundation

/// A change waiting to become messages (`webhook_events`, written by the change log's trigger).
package struct WebhookEvent: Sendable, Equatable {
    package let seq: Int64
    /// Such as `game.created` or `video.ready`.
    package let eventType: String
    /// The resource's kind, id and version as the change left them, and whether it is gone.
    package let type: String
    package let id: String
    package let version: Int
    package let deleted: Bool
    /// When it was committed (milliseconds since 1970).
    package let changedAt: Int64
}

/// What the dispatcher makes of one event: a message for the endpoints it matches, or
/// nothing when it matches none.
package struct WebhookDispatch: Sendable {
    package let event: Int64
    package let message: (id: String, eventType: String, body: [UInt8])?
    /// The endpoints it goes to, each with its delivery's id.
    package let deliveries: [(id: CatalogID, webhook: CatalogID)]

    package init(event: Int64, message: (id: String, eventType: String, body: [UInt8])?, deliveries: [(id: CatalogID, webhook: CatalogID)]) {
        self.event = event
        self.message = message
        self.deliveries = deliveries
    }
}

/// A delivery a sender holds: what it sends, and how many times it was tried.
package struct ClaimedDelivery: Sendable {
    package let seq: Int64
    package let id: CatalogID
    package let webhook: CatalogID
    package let messageID: String
    package let body: [UInt8]
    package let attempts: Int
    /// When it was first tried (milliseconds), if it was.
    package let firstAttempt: Int64?
}

/// What one attempt came to.
package struct DeliveryOutcome: Sendable {
    package enum Next: Sendable, Equatable {
        /// A 2xx: done.
        case delivered
        /// Tried again at this time (milliseconds).
        case retry(at: Int64)
        /// No more attempts (three days passed since the first).
        case failed
    }

    package let delivery: ClaimedDelivery
    package let attemptedAt: Int64
    package let status: Int?
    package let durationMilliseconds: Int
    package let error: String?
    /// The start of the answer's body (at most 4 KiB).
    package let response: [UInt8]?
    package let next: Next

    package init(delivery: ClaimedDelivery, attemptedAt: Int64, status: Int?, durationMilliseconds: Int, error: String?, response: [UInt8]?, next: Next) {
        self.delivery = delivery
        self.attemptedAt = attemptedAt
        self.status = status
        self.durationMilliseconds = durationMilliseconds
        self.error = error
        self.response = response
        self.next = next
    }
}

/// The sending side of webhooks: events turned into messages and deliveries, deliveries
/// claimed with leases (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so each attempt is made
/// by one replica), outcomes recorded in batches, endpoints that fail for days disabled,
/// backlogs bounded, and what ended long ago purged.
public final class WebhookQueue: Sendable {
    let database: any SQLDatabase

    init(database: any SQLDatabase) {
        self.database = database
    }

    // MARK: Events into deliveries

    /// The database's generation (``SQLDatabase/generation()``): while it stays the same,
    /// no event can have come (they are written by commits). `nil` where it cannot be told.
    package func generation() -> UInt64? { try? database.generation() }

    /// The oldest events waiting, at most `limit`.
    package func events(limit: Int) throws(StoreError) -> [WebhookEvent] {
        try guarded {
            try database.read { db in
                try db.fetchRows("SELECT seq, event_type, type, id, version, deleted, changed_at FROM webhook_events ORDER BY seq LIMIT ?", [limit]).compactMap {
                    row in
                    guard let seq = row[0].int64, let eventType = row[1].string, let type = row[2].string, let id = row[3].string else { return nil }
                    return WebhookEvent(
                        seq: seq, eventType: eventType, type: type, id: id, version: row[4].int ?? 0, deleted: row[5].bool, changedAt: row[6].int64 ?? 0)
                }
            }
        }
    }

    /// The endpoints messages are made for now (the enabled ones).
    package func enabledEndpoints() throws(StoreError) -> [WebhookRow] {
        try guarded {
            try database.read { db in
                try db.fetchRows(
                    "SELECT \(WebhookStore.columns(counted: false)) FROM webhooks w WHERE w.enabled = 1"
                ).compactMap(WebhookStore.row)
            }
        }
    }

    /// Records what the dispatcher made of events, deleting them in the same transaction:
    /// each event becomes its message and deliveries once, even when two replicas
    /// dispatch the same events (the one whose delete found it keeps it). The deliveries
    /// of the endpoints in `handOff` (at most as many as each says) are made held by
    /// `holder` until `until`, for its sender to send at once without claiming them.
    /// - Returns: the endpoints that got deliveries, and those handed off.
    package func dispatch(
        _ batch: [WebhookDispatch], now: Int64, handOff: [CatalogID: Int] = [:], holder: String = "", until: Int64 = 0
    ) throws(StoreError) -> (
        touched: Set<CatalogID>, handedOff: [ClaimedDelivery]
    ) {
        try guarded {
            try database.write(atomic: true, background: true) { db in
                var touched: Set<CatalogID> = []
                var room = handOff
                var handed: [ClaimedDelivery] = []
                for item in batch {
                    guard try db.execute("DELETE FROM webhook_events WHERE seq = ?", [item.event]) == 1, let message = item.message, !item.deliveries.isEmpty
                    else { continue }
                    try db.execute(
                        "INSERT INTO webhook_messages (id, event_type, body, created_at) VALUES (?, ?, ?, ?)", [message.id, message.eventType, message.body, now])
                    for delivery in item.deliveries {
                        let held = (room[delivery.webhook] ?? 0) > 0
                        if held { room[delivery.webhook, default: 0] -= 1 }
                        let seq = try db.fetchValue(
                            """
                            INSERT INTO webhook_deliveries (id, webhook_id, message_id, status, next_attempt_at, locked_by, locked_until, created_at, updated_at)
                            VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?) RETURNING seq
                            """,
                            [delivery.id.rawValue, delivery.webhook.rawValue, message.id, now, held ? holder : nil, held ? until : nil, now, now]
                        ).int64
                        touched.insert(delivery.webhook)
                        if held, let seq {
                            handed.append(
                                ClaimedDelivery(
                                    seq: seq, id: delivery.id, webhook: delivery.webhook, messageID: message.id, body: message.body, attempts: 0, firstAttempt: nil))
                        }
                    }
                }
                // Once no event at or below an endpoint's `events_after` waits, every
                // later one is after it, whatever it is numbered (SQLite numbers from 1
                // again once the table is empty).
                try db.execute(
                    "UPDATE webhooks SET events_after = 0 WHERE events_after > 0 AND NOT EXISTS (SELECT 1 FROM webhook_events e WHERE e.seq <= webhooks.events_after)", [])
                return (touched, handed)
            }
        }
    }

    // MARK: Claims and outcomes

    /// Takes for `holder`, until `until`, at most `limit` of the deliveries of `webhook`
    /// due at `now` that no one holds (and not those of `excluding`, which it holds), the
    /// oldest due first. - Returns: them, and when the endpoint's next delivery not taken
    /// is due (milliseconds; one held by another is due when its lease ends), if one waits.
    package func claim(
        webhook: CatalogID, limit: Int, holder: String, until: Int64, now: Int64, excluding: Set<Int64> = []
    ) throws(StoreError) -> (
        claimed: [ClaimedDelivery], nextDue: Int64?
    ) {
        let skipped = excluding.isEmpty ? "" : " AND seq NOT IN (\(Self.placeholders(excluding.count)))"
        let free = "(locked_until IS NULL OR locked_until < ?)"
        func nextDue(_ db: any SQLConnection) throws -> Int64? {
            try db.fetchValue(
                "SELECT min(CASE WHEN \(free) THEN next_attempt_at ELSE \(db.dialect.greatest)(next_attempt_at, locked_until) END) FROM webhook_deliveries "
                    + "WHERE webhook_id = ? AND status = 'pending'" + skipped,
                ([now, webhook.rawValue] as SQLArguments) + SQLArguments(Array(excluding))
            ).int64
        }
        return try guarded {
            // Most rounds find nothing due: a read tells, without a write transaction.
            let due = try database.read { db in
                try db.exists(
                    "SELECT 1 FROM webhook_deliveries WHERE webhook_id = ? AND status = 'pending' AND next_attempt_at <= ? AND \(free)\(skipped) LIMIT 1",
                    ([webhook.rawValue, now, now] as SQLArguments) + SQLArguments(Array(excluding)))
            }
            guard due else { return ([], try database.read(nextDue)) }
            return try database.write(atomic: true, background: true) { db in
                let rows = try db.fetchRows(
                    """
                    SELECT seq, id, message_id, attempts, first_attempt_at FROM webhook_deliveries
                    WHERE webhook_id = ? AND status = 'pending' AND next_attempt_at <= ? AND \(free)\(skipped)
                    ORDER BY next_attempt_at LIMIT ?
                    """ + db.dialect.forDeleteSkippingLocked, ([webhook.rawValue, now, now] as SQLArguments) + SQLArguments(Array(excluding)) + [limit])
                var claimed: [ClaimedDelivery] = []
                if !rows.isEmpty {
                    let seqs = rows.compactMap { $0[0].int64 }
                    try db.execute(
                        "UPDATE webhook_deliveries SET locked_by = ?, locked_until = ? WHERE seq IN (\(Self.placeholders(seqs.count)))",
                        ([holder, until] as SQLArguments) + SQLArguments(seqs))
                    let messages = Array(Set(rows.compactMap { $0[2].string }))
                    var bodies: [String: [UInt8]] = [:]
                    for row in try db.fetchRows("SELECT id, body FROM webhook_messages WHERE id IN (\(Self.placeholders(messages.count)))", SQLArguments(messages)) {
                        if let id = row[0].string { bodies[id] = row[1].bytes ?? [] }
                    }
                    claimed = rows.compactMap { row in
                        guard let seq = row[0].int64, let id = row[1].string.flatMap(CatalogID.init), let message = row[2].string, let body = bodies[message]
                        else { return nil }
                        return ClaimedDelivery(seq: seq, id: id, webhook: webhook, messageID: message, body: body, attempts: row[3].int ?? 0, firstAttempt: row[4].int64)
                    }
                }
                return (claimed, try nextDue(db))
            }
        }
    }

    /// Records `outcomes` (of deliveries `holder` held) in one transaction: each delivery
    /// delivered, due again, or failed, its latest attempt on its row (the one before moved
    /// to `webhook_attempts`). An endpoint with a success is failing no more; one whose
    /// attempts have all failed since `disableAfter` ago or longer, or since the first
    /// attempt of a delivery that ran out of attempts now, is disabled.
    /// - Returns: the endpoints disabled now.
    package func record(
        _ outcomes: [DeliveryOutcome], holder: String, now: Int64, disableAfter: Int64
    ) throws(StoreError) -> (
        recorded: [DeliveryOutcome], disabled: [CatalogID]
    ) {
        try guarded {
            try database.write(atomic: true, background: true) { db in
                var succeeded: Set<CatalogID> = [], failed: Set<CatalogID> = []
                // By endpoint: the latest first attempt of a delivery that ran out of attempts now.
                var exhausted: [CatalogID: Int64] = [:]
                var recorded: [DeliveryOutcome] = []
                for outcome in outcomes {
                    let delivery = outcome.delivery
                    if delivery.attempts > 0 {
                        try db.execute(
                            """
                            INSERT INTO webhook_attempts (delivery_seq, attempted_at, status, duration_ms, error, response)
                            SELECT seq, last_attempt_at, last_status, last_duration_ms, last_error, last_response FROM webhook_deliveries
                            WHERE seq = ? AND locked_by = ? AND last_attempt_at IS NOT NULL
                            """, [delivery.seq, holder])
                    }
                    let status: String, next: Int64?
                    switch outcome.next {
                    case .delivered: (status, next) = ("delivered", nil)
                    case let .retry(at): (status, next) = ("pending", at)
                    case .failed: (status, next) = ("failed", nil)
                    }
                    // Another took it (this sender's lease ended): its outcome is the other's to record.
                    let changed = try db.execute(
                        """
                        UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, attempts = attempts + 1, first_attempt_at = coalesce(first_attempt_at, ?),
                            last_attempt_at = ?, last_status = ?, last_duration_ms = ?, last_error = ?, last_response = ?, locked_by = NULL, locked_until = NULL,
                            updated_at = ?
                        WHERE seq = ? AND locked_by = ?
                        """,
                        [
                            status, next, outcome.attemptedAt, outcome.attemptedAt, outcome.status, outcome.durationMilliseconds, outcome.error, outcome.response, now,
                            delivery.seq, holder,
                        ])
                    guard changed == 1 else { continue }
                    recorded.append(outcome)
                    if outcome.next == .delivered { succeeded.insert(delivery.webhook) } else { failed.insert(delivery.webhook) }
                    if outcome.next == .failed {
                        let first = delivery.firstAttempt ?? outcome.attemptedAt
                        exhausted[delivery.webhook] = max(exhausted[delivery.webhook] ?? first, first)
                    }
                }
                for webhook in succeeded {
                    try db.execute("UPDATE webhooks SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL", [webhook.rawValue])
                }
                var disabled: [CatalogID] = []
                for webhook in failed.subtracting(succeeded) {
                    try db.execute("UPDATE webhooks SET failing_since = ? WHERE id = ? AND failing_since IS NULL", [now, webhook.rawValue])
                    // Failing for `disableAfter`, or for the whole life of a delivery that ran out.
                    let threshold = max(now - disableAfter, exhausted[webhook] ?? Int64.min)
                    let since = "since " + Timestamp.string(milliseconds: threshold)
                    let changed = try db.execute(
                        """
                        UPDATE webhooks SET enabled = 0, disabled_at = ?, updated_at = \(db.dialect.greatest)(?, created_at), version = version + 1,
                            disabled_reason = 'Every attempt has failed ' || ? WHERE id = ? AND enabled = 1 AND failing_since <= ?
                        """, [now, now, since, webhook.rawValue, threshold])
                    if changed == 1 { disabled.append(webhook) }
                }
                return (recorded, disabled)
            }
        }
    }

    /// Extends `holder`'s leases on the deliveries `seqs` to `until`.
    package func renew(_ seqs: [Int64], holder: String, until: Int64) throws(StoreError) {
        guard !seqs.isEmpty else { return }
        try guarded {
            _ = try database.write(background: true) { db in
                try db.execute(
                    "UPDATE webhook_deliveries SET locked_until = ? WHERE locked_by = ? AND seq IN (\(Self.placeholders(seqs.count)))",
                    ([until, holder] as SQLArguments) + SQLArguments(seqs))
            }
        }
    }

    /// Lets go of the deliveries `seqs` `holder` holds, or (`nil`) of every one it holds
    /// (a sender stopping): another may take them at once.
    package func release(_ seqs: [Int64]? = nil, holder: String) throws(StoreError) {
        if let seqs, seqs.isEmpty { return }
        try guarded {
            _ = try database.write(background: true) { db in
                try db.execute(
                    "UPDATE webhook_deliveries SET locked_by = NULL, locked_until = NULL WHERE locked_by = ?"
                        + (seqs.map { " AND seq IN (\(Self.placeholders($0.count)))" } ?? ""), ([holder] as SQLArguments) + SQLArguments(seqs ?? []))
            }
        }
    }

    /// Lets go of every delivery held, for a server that starts again when it is the only
    /// one (its senders before the restart are gone).
    package func recoverAlone() throws(StoreError) {
        try guarded {
            _ = try database.write(background: true) { db in
                try db.execute("UPDATE webhook_deliveries SET locked_by = NULL, locked_until = NULL WHERE locked_by IS NOT NULL AND status = 'pending'", [])
            }
        }
    }

    /// `?, ?, …` for `count` parameters.
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}
