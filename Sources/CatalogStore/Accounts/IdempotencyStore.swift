import Foundation

/// The stored first answer to a request sent with an `Idempotency-Key`.
public struct StoredAnswer: Sendable, Hashable {
    /// The SHA-256 of the request's method, target and body.
    public let fingerprint: [UInt8]
    /// The response status.
    public let status: Int
    /// The response fields to replay.
    public let headers: [String: String]
    /// The response body.
    public let body: [UInt8]

    /// An answer to store.
    public init(fingerprint: [UInt8], status: Int, headers: [String: String], body: [UInt8]) {
        self.fingerprint = fingerprint
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Answers kept by `(caller, Idempotency-Key)` for ``retention``, in the database, so
/// they survive restarts and are shared by every process on the same file.
public final class IdempotencyStore: Sendable {
    /// How long an answer is kept (24 hours).
    public static let retention: Int64 = 24 * 60 * 60 * 1000

    private let database: any SQLDatabase

    init(database: any SQLDatabase) {
        self.database = database
    }

    /// How long a claim (a first request still running, ``claim(caller:key:fingerprint:now:)``)
    /// holds its key: past it, its server is taken to have died and another may run the key.
    public static let claimLifetime: Int64 = 15 * 60 * 1000

    /// The answer stored for `key` of `caller`, if one younger than ``retention`` exists.
    public func answer(caller: String, key: String, now: Int64) throws(StoreError) -> StoredAnswer? {
        try guarded { try database.read { db in try Self.answer(db, caller: caller, key: key, now: now) } }
    }

    /// What a request finds when it claims its key in the database.
    public enum Claim: Sendable {
        /// The key is this request's to run (and to settle with ``store(_:caller:key:now:completion:)`` or ``release(caller:key:)``).
        case claimed
        /// Another request with the key is running (on this server or another).
        case running
        /// The key's first request was answered.
        case answered(StoredAnswer)
    }

    /// Claims `key` of `caller` durably, for servers that share the database: a row marks
    /// the first request as running (status 0) until it is settled. An expired answer or
    /// a claim older than ``claimLifetime`` is taken over.
    public func claim(caller: String, key: String, fingerprint: [UInt8], now: Int64) throws(StoreError) -> Claim {
        try guarded {
            try database.write { db -> Claim in
                let claimed = try db.execute("""
                    INSERT INTO idempotency_keys (caller, key, fingerprint, status, headers, body, created_at) VALUES (?, ?, ?, 0, '', ?, ?)
                    ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = 0, headers = '', body = excluded.body,
                        created_at = excluded.created_at
                    WHERE idempotency_keys.created_at <= ? OR (idempotency_keys.status = 0 AND idempotency_keys.created_at <= ?)
                    """, [caller, key, fingerprint, [UInt8](), now, now - Self.retention, now - Self.claimLifetime])
                if claimed == 1 { return .claimed }
                return try Self.answer(db, caller: caller, key: key, now: now).map(Claim.answered) ?? .running
            }
        }
    }

    /// Gives up the claim on `key` of `caller` (its request's answer is not kept).
    public func release(caller: String, key: String) {
        database.submit({ db in
            try db.execute("DELETE FROM idempotency_keys WHERE caller = ? AND key = ? AND status = 0", [caller, key])
        }, completion: { _ in })
    }

    /// The answer (not a claim) stored for `key` of `caller` and younger than ``retention``, as `db` sees it.
    private static func answer(_ db: any SQLConnection, caller: String, key: String, now: Int64) throws -> StoredAnswer? {
                guard let row = try db.fetchRow("""
                    SELECT fingerprint, status, headers, body FROM idempotency_keys WHERE caller = ? AND key = ? AND created_at > ? AND status != 0
                    """, [caller, key, now - Self.retention]) else { return nil }
                let fingerprint = row[0].bytes ?? [], body = row[3].bytes ?? [], lines = row[2].string ?? ""
                var headers: [String: String] = [:]
                for line in lines.split(separator: "\n") {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    if parts.count == 2 { headers[String(parts[0])] = String(parts[1].dropFirst()) }
                }
                return StoredAnswer(fingerprint: fingerprint, status: row[1].int ?? 0, headers: headers, body: body)
    }

    /// Stores `answer` for `key` of `caller` (replacing an expired one) and forgets a
    /// few expired answers; `completion` runs once it is durable.
    public func store(_ answer: StoredAnswer, caller: String, key: String, now: Int64,
                      completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let lines = answer.headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
        database.submit(atomic: true, { db in
            try db.execute("""
                INSERT INTO idempotency_keys (caller, key, fingerprint, status, headers, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status, headers = excluded.headers,
                    body = excluded.body, created_at = excluded.created_at
                """, [caller, key, answer.fingerprint, answer.status, lines, answer.body, now])
            try db.execute("""
                DELETE FROM idempotency_keys WHERE (caller, key) IN
                    (SELECT caller, key FROM idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT 100)
                """, [now - Self.retention])
        }, completion: completion)
    }
}
