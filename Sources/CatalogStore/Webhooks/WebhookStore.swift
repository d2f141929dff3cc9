import CatalogModels
import Foundation

/// An endpoint's row (`webhooks`, Migrations/0016): what admins see of it, and its sealed
/// secrets (opened only by the sender, with the server's webhook key).
package struct WebhookRow: Sendable, Equatable {
    package var id: CatalogID
    package var url: String
    package var eventTypes: [String]
    package var description: String
    package var enabled: Bool
    /// The signing secret, and the one before the last rotation with when it stops
    /// signing, sealed (``SecretBox``).
    package var secret: [UInt8]
    package var previousSecret: [UInt8]?
    package var previousSecretExpires: Int64?
    package var failingSince: Int64?
    package var disabledAt: Int64?
    package var disabledReason: String?
    package var dropped: Int
    /// How many of its deliveries wait.
    package var pending: Int
    package var createdAt: Int64
    package var updatedAt: Int64
    package var version: Int
    /// The highest event waiting when it was made or enabled again: it gets only later
    /// ones (0: every waiting event is later).
    package var eventsAfter: Int64 = 0

    /// The endpoint as admins see it (never its secrets).
    package var webhook: Webhook {
        Webhook(
            id: id, url: url, eventTypes: eventTypes, description: description, enabled: enabled, disabledReason: disabledReason,
            disabledAt: disabledAt.map(Timestamp.date(milliseconds:)), failingSince: failingSince.map(Timestamp.date(milliseconds:)),
            previousSecretExpiresAt: previousSecretExpires.map(Timestamp.date(milliseconds:)), pending: pending, dropped: dropped,
            createdAt: Timestamp.date(milliseconds: createdAt), updatedAt: Timestamp.date(milliseconds: updatedAt), version: version)
    }
}

/// What an admin may change of an endpoint (a merge patch, applied).
package struct WebhookChanges: Sendable {
    package var url: String
    package var eventTypes: [String]
    package var description: String
    package var enabled: Bool

    package init(url: String, eventTypes: [String], description: String, enabled: Bool) {
        self.url = url
        self.eventTypes = eventTypes
        self.description = description
        self.enabled = enabled
    }
}

/// Webhook endpoints as admins manage them (`/v1/webhooks`), and their deliveries as
/// admins look at and retry them. What sends them is ``WebhookQueue``.
public final class WebhookStore: Sendable {
    let database: any SQLDatabase

    init(database: any SQLDatabase) {
        self.database = database
    }

    /// An endpoint's columns (of `webhooks w`), with how many of its deliveries wait
    /// when `counted` (else 0).
    static func columns(counted: Bool = true) -> String {
        "w.id, w.url, w.event_types, w.description, w.enabled, w.secret, w.previous_secret, w.previous_secret_expires_at, w.failing_since, "
            + "w.disabled_at, w.disabled_reason, w.dropped, w.created_at, w.updated_at, w.version, "
            + (counted ? "(SELECT count(*) FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'pending')" : "0") + ", w.events_after"
    }

    /// The highest event waiting now: what an endpoint made or enabled now comes after.
    /// Exact on either engine: the write reading it excludes every other write that logs
    /// a change (SQLite's one writer; on PostgreSQL the change log's lock, which the
    /// writers hold from their first statement and the trigger writing an event takes),
    /// so every event numbered so far is committed, and every later one comes after.
    /// (The header of `Migrations/postgresql/0011_webhook_events_after.sql`, kept as it
    /// shipped, describes the first version, which also took a lock on `webhook_events`.)
    static let waitingTop = "(SELECT coalesce(max(seq), 0) FROM webhook_events)"

    static func row(_ values: SQLRow) -> WebhookRow? {
        guard let id = values[0].string.flatMap(CatalogID.init), let url = values[1].string, let secret = values[5].bytes else { return nil }
        return WebhookRow(
            id: id, url: url, eventTypes: eventTypes(values[2].string), description: values[3].string ?? "", enabled: values[4].bool, secret: secret,
            previousSecret: values[6].bytes, previousSecretExpires: values[7].int64, failingSince: values[8].int64, disabledAt: values[9].int64,
            disabledReason: values[10].string, dropped: values[11].int ?? 0, pending: values[15].int ?? 0, createdAt: values[12].int64 ?? 0,
            updatedAt: values[13].int64 ?? 0, version: values[14].int ?? 1, eventsAfter: values[16].int64 ?? 0)
    }

    /// The event names of the JSON array `text`.
    static func eventTypes(_ text: String?) -> [String] {
        guard let data = text?.data(using: .utf8), let names = try? JSONDecoder().decode([String].self, from: data) else { return [] }
        return names
    }

    static func eventTypesText(_ names: [String]) -> String {
        (try? JSONEncoder().encode(names)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
    }

    private func write<T: Sendable>(
        _ options: WriteOptions, _ completion: @escaping @Sendable (Result<T, any Error>) -> Void, _ work: @escaping (any SQLConnection) throws -> T
    ) {
        database.submit(options, atomic: true, work) { result in completion(result.mapError { StoreError.from($0) }) }
    }

    private static func fetch(_ db: any SQLConnection, _ id: CatalogID) throws -> WebhookRow? {
        try db.fetchRow("SELECT \(columns()) FROM webhooks w WHERE w.id = ?", [id.rawValue]).flatMap(row)
    }

    // MARK: Endpoints

    /// Every endpoint, oldest first.
    public func list() throws(StoreError) -> [Webhook] {
        try guarded { try database.read { db in try db.fetchRows("SELECT \(Self.columns()) FROM webhooks w ORDER BY w.created_at, w.id").compactMap(Self.row) } }
            .map(\.webhook)
    }

    /// The endpoint `id`, if there is one.
    package func row(_ id: CatalogID) throws(StoreError) -> WebhookRow? {
        try guarded { try database.read { db in try Self.fetch(db, id) } }
    }

    /// Creates an endpoint whose secret is sealed as `secret`; at most
    /// ``WebhookRules/maxEndpoints`` exist (``StoreError/quotaExceeded(_:)``).
    package func create(
        id: CatalogID, _ values: WebhookChanges, secret: [UInt8], options: WriteOptions, completion: @escaping @Sendable (Result<WebhookRow, any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        write(options, completion) { db in
            // Counted under the writer's lock: two creations cannot both pass the limit.
            let count = try db.fetchValue("SELECT count(*) FROM webhooks").int ?? 0
            guard count < WebhookRules.maxEndpoints else {
                throw StoreError.quotaExceeded("A catalog keeps at most \(WebhookRules.maxEndpoints) webhook endpoints; delete one first.")
            }
            try db.execute(
                """
                INSERT INTO webhooks (id, url, event_types, description, enabled, secret, created_at, updated_at, version, events_after)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, \(Self.waitingTop))
                """,
                [id.rawValue, values.url, Self.eventTypesText(values.eventTypes), values.description, values.enabled, secret, now, now])
            guard let row = try Self.fetch(db, id) else { throw StoreError.notFound }
            return row
        }
    }

    /// Replaces what an admin may change of the endpoint `id`; enabling it again forgets
    /// why it was disabled and since when it failed, and gives it the changes committed
    /// from then on (not those that wait from before).
    package func update(
        _ id: CatalogID, _ values: WebhookChanges, preconditions: WritePreconditions, options: WriteOptions,
        completion: @escaping @Sendable (Result<WebhookRow, any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        write(options, completion) { db in
            try preconditions.check(current: try db.fetchValue("SELECT version FROM webhooks WHERE id = ?" + db.dialect.forUpdate, [id.rawValue]).int)
            try db.execute(
                """
                UPDATE webhooks SET url = ?, event_types = ?, description = ?,
                    events_after = CASE WHEN ? = 1 AND enabled = 0 THEN \(Self.waitingTop) ELSE events_after END,
                    failing_since = CASE WHEN ? = 1 AND enabled = 0 THEN NULL ELSE failing_since END,
                    disabled_at = CASE WHEN ? = 1 THEN NULL ELSE disabled_at END,
                    disabled_reason = CASE WHEN ? = 1 THEN NULL ELSE disabled_reason END,
                    enabled = ?, updated_at = \(db.dialect.greatest)(?, created_at), version = version + 1 WHERE id = ?
                """,
                [
                    values.url, Self.eventTypesText(values.eventTypes), values.description, values.enabled, values.enabled, values.enabled,
                    values.enabled, values.enabled, now, id.rawValue,
                ])
            guard let row = try Self.fetch(db, id) else { throw StoreError.notFound }
            return row
        }
    }

    /// Deletes the endpoint `id` with its deliveries (their messages go with the next purge).
    package func delete(_ id: CatalogID, preconditions: WritePreconditions, options: WriteOptions, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        write(options, completion) { db in
            try preconditions.check(current: try db.fetchValue("SELECT version FROM webhooks WHERE id = ?" + db.dialect.forUpdate, [id.rawValue]).int)
            try db.execute("DELETE FROM webhook_attempts WHERE delivery_seq IN (SELECT seq FROM webhook_deliveries WHERE webhook_id = ?)", [id.rawValue])
            try db.execute("DELETE FROM webhook_deliveries WHERE webhook_id = ?", [id.rawValue])
            try db.execute("DELETE FROM webhooks WHERE id = ?", [id.rawValue])
        }
    }

    /// Makes `secret` the endpoint's signing secret; the one it replaces signs too until
    /// `previousUntil` (`nil`: it stops now). - Returns: the endpoint as it now is.
    package func rotate(
        _ id: CatalogID, secret: [UInt8], previousUntil: Int64?, options: WriteOptions, completion: @escaping @Sendable (Result<WebhookRow, any Error>) -> Void
    ) {
        let now = Timestamp.milliseconds(Date())
        write(options, completion) { db in
            try db.execute(
                """
                UPDATE webhooks SET previous_secret = CASE WHEN ? = 1 THEN secret END, previous_secret_expires_at = ?, secret = ?,
                    updated_at = \(db.dialect.greatest)(?, created_at), version = version + 1 WHERE id = ?
                """, [previousUntil == nil ? 0 : 1, previousUntil, secret, now, id.rawValue])
            guard let row = try Self.fetch(db, id) else { throw StoreError.notFound }
            return row
        }
    }

    // MARK: Deliveries

    static let deliveryColumns =
        "d.seq, d.id, d.webhook_id, d.message_id, m.event_type, d.status, d.attempts, d.next_attempt_at, d.last_attempt_at, d.last_status, "
        + "d.last_duration_ms, d.last_error, d.last_response, d.created_at"

    private static func delivery(_ values: SQLRow) -> (seq: Int64, delivery: WebhookDelivery)? {
        guard let seq = values[0].int64, let id = values[1].string.flatMap(CatalogID.init), let webhook = values[2].string.flatMap(CatalogID.init),
            let message = values[3].string, let status = values[5].string.flatMap(WebhookDeliveryStatus.init(rawValue:))
        else { return nil }
        let last = values[8].int64.map { at in
            attempt(at: at, status: values[9].int, duration: values[10].int ?? 0, error: values[11].string, response: values[12].bytes)
        }
        return (
            seq,
            WebhookDelivery(
                id: id, webhookId: webhook, messageId: message, eventType: values[4].string ?? "", status: status, attemptCount: values[6].int ?? 0,
                nextAttemptAt: status == .pending ? values[7].int64.map(Timestamp.date(milliseconds:)) : nil, lastAttempt: last,
                createdAt: Timestamp.date(milliseconds: values[13].int64 ?? 0))
        )
    }

    private static func attempt(at: Int64, status: Int?, duration: Int, error: String?, response: [UInt8]?) -> WebhookAttempt {
        WebhookAttempt(
            at: Timestamp.date(milliseconds: at), statusCode: status, durationMilliseconds: duration, error: error,
            response: response.map { String(decoding: $0, as: UTF8.self) })
    }

    /// The deliveries of the endpoint `webhook`, newest first, after the cursor `before`
    /// (a delivery's `seq`), of `status` when given: at most `limit`, and the cursor of
    /// the next page when there is one.
    package func deliveries(
        of webhook: CatalogID, status: WebhookDeliveryStatus?, limit: Int, before: Int64?
    ) throws(StoreError) -> (items: [WebhookDelivery], next: Int64?) {
        var sql =
            "SELECT \(Self.deliveryColumns) FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id WHERE d.webhook_id = ?"
        var arguments: SQLArguments = [webhook.rawValue]
        if let status {
            sql += " AND d.status = ?"
            arguments.append(status.rawValue)
        }
        if let before {
            sql += " AND d.seq < ?"
            arguments.append(before)
        }
        sql += " ORDER BY d.seq DESC LIMIT ?"
        arguments.append(limit + 1)
        let rows = try guarded { try database.read { db in try db.fetchRows(sql, arguments).compactMap(Self.delivery) } }
        return (rows.prefix(limit).map(\.delivery), rows.count > limit ? rows[limit - 1].seq : nil)
    }

    /// The delivery `id` of the endpoint `webhook`, with every attempt and the message's body.
    package func delivery(_ id: CatalogID, of webhook: CatalogID) throws(StoreError) -> (delivery: WebhookDelivery, body: [UInt8])? {
        try guarded {
            try database.snapshot { db in
                guard
                    let row = try db.fetchRow(
                        "SELECT \(Self.deliveryColumns), m.body FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id WHERE d.id = ? AND d.webhook_id = ?",
                        [id.rawValue, webhook.rawValue]),
                    let found = Self.delivery(row)
                else { return nil }
                var delivery = found.delivery
                let earlier = try db.fetchRows(
                    "SELECT attempted_at, status, duration_ms, error, response FROM webhook_attempts WHERE delivery_seq = ? ORDER BY attempted_at", [found.seq]
                ).map { Self.attempt(at: $0[0].int64 ?? 0, status: $0[1].int, duration: $0[2].int ?? 0, error: $0[3].string, response: $0[4].bytes) }
                delivery.attempts = earlier + (delivery.lastAttempt.map { [$0] } ?? [])
                return (delivery, row[14].bytes ?? [])
            }
        }
    }

    /// Makes the delivery `id` of the endpoint `webhook` due now, whatever it ended as (an
    /// admin's retry; one a sender holds is sent by it once its attempt ends); refused
    /// while the endpoint is disabled. - Returns: the delivery as it now is.
    package func retry(_ id: CatalogID, of webhook: CatalogID, options: WriteOptions, completion: @escaping @Sendable (Result<WebhookDelivery, any Error>) -> Void) {
        let now = Timestamp.milliseconds(Date())
        write(options, completion) { db in
            guard let enabled = try db.fetchValue("SELECT enabled FROM webhooks WHERE id = ?", [webhook.rawValue]).int64 else { throw StoreError.notFound }
            guard enabled == 1 else { throw StoreError.conflict("The endpoint is disabled: enable it (PATCH {\"enabled\":true}) before retrying its deliveries.") }
            let changed = try db.execute(
                """
                UPDATE webhook_deliveries SET next_attempt_at = ?, first_attempt_at = CASE WHEN status = 'pending' THEN first_attempt_at END, status = 'pending',
                    updated_at = ? WHERE id = ? AND webhook_id = ?
                """, [now, now, id.rawValue, webhook.rawValue])
            guard changed == 1,
                let row = try db.fetchRow(
                    "SELECT \(Self.deliveryColumns) FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id WHERE d.id = ?", [id.rawValue]),
                let found = Self.delivery(row)
            else { throw StoreError.notFound }
            return found.delivery
        }
    }
}
