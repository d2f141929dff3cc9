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

    /// The answer stored for `key` of `caller`, if one younger than ``retention`` exists.
    public func answer(caller: String, key: String, now: Int64) throws(StoreError) -> StoredAnswer? {
        try guarded { try database.read { db in try Self.answer(db, caller: caller, key: key, now: now) } }
    }

    /// The answer (not a claim an earlier version of the server left) stored for `key` of `caller` and younger than ``retention``, as `db` sees it.
    private static func answer(_ db: any SQLConnection, caller: String, key: String, now: Int64) throws -> StoredAnswer? {
        guard
            let row = try db.fetchRow(
                """
                SELECT fingerprint, status, headers, body FROM idempotency_keys WHERE caller = ? AND key = ? AND created_at > ? AND status != 0
                """, [caller, key, now - Self.retention])
        else { return nil }
        let fingerprint = row[0].bytes ?? [], body = row[3].bytes ?? [], lines = row[2].string ?? ""
        var headers: [String: String] = [:]
        for line in lines.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { headers[String(parts[0])] = String(parts[1].dropFirst()) }
        }
        return StoredAnswer(fingerprint: fingerprint, status: row[1].int ?? 0, headers: headers, body: body)
    }

    /// Stores `answer` for `key` of `caller` in a transaction of its own (for an answer
    /// made without a write), as ``keep(_:_:caller:key:now:)`` does; `completion` runs
    /// once it is durable.
    public func store(
        _ answer: StoredAnswer, caller: String, key: String, now: Int64,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        database.submit(atomic: true, { db in try Self.keep(db, answer, caller: caller, key: key, now: now) }, completion: completion)
    }

    /// Keeps `answer` for `key` of `caller` on `db` (in place of an expired answer, or of
    /// the claim an earlier version of the server left) and forgets a few expired answers.
    /// - Throws: `conflict` when an answer for the key is there already: a duplicate
    ///   request committed first.
    static func keep(_ db: any SQLConnection, _ answer: StoredAnswer, caller: String, key: String, now: Int64) throws {
        let lines = answer.headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
        let kept = try db.execute(
            """
            INSERT INTO idempotency_keys (caller, key, fingerprint, status, headers, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status, headers = excluded.headers,
                body = excluded.body, created_at = excluded.created_at
            WHERE idempotency_keys.created_at <= ? OR idempotency_keys.status = 0
            """, [caller, key, answer.fingerprint, answer.status, lines, answer.body, now, now - Self.retention])
        guard kept == 1 else {
            throw StoreError.conflict("Another request with this Idempotency-Key was answered first; send it again to get that answer.")
        }
        try db.execute(
            """
            DELETE FROM idempotency_keys WHERE (caller, key) IN
                (SELECT caller, key FROM idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT 100)
            """, [now - Self.retention])
    }
}

extension TransactionAnswer.Capture {
    /// Keeps `answer` for `key` of `caller` in this write's transaction: it commits with the
    /// write, or the write fails with it (``IdempotencyStore/keep(_:_:caller:key:now:)``).
    public func keep(_ answer: StoredAnswer, caller: String, key: String, now: Int64) {
        run { db in try IdempotencyStore.keep(db, answer, caller: caller, key: key, now: now) }
    }
}
