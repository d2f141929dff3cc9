import CatalogIdentity
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Synchronization

/// `Idempotency-Key` on every `POST`, as the IETF httpapi idempotency-key draft has it:
/// the same key, caller and request within 24 hours replays the first answer (status,
/// body, `Location`, `ETag`) without writing again; the same key with another request is
/// a 422; a duplicate that arrives while the first is still running is a 409. Answers
/// live in the database (``IdempotencyStore``), written in the same transaction as the
/// change they answer (``keep(_:_:in:)``), so a crash can never keep one without the
/// other: a retry after a restart replays what committed, or runs what did not. Only
/// successful answers are kept: a failure is decided again on a retry; and a route may
/// keep none (a new API key's secret is never written to disk, so a retry of it makes
/// another key). Where servers share the database (PostgreSQL), a duplicate that runs on
/// another server at the same time fails to keep its answer, so its write rolls back and
/// it is answered 409.
final class Idempotency: Sendable {
    /// The longest key accepted, in bytes.
    static let maxKeyLength = 255
    /// The largest answer kept; a larger one is answered but not replayable.
    static let maxStoredBody = 1 << 20

    private let store: IdempotencyStore
    /// Keys whose first request is running here, as `caller NUL key`.
    private let running = Mutex<Set<String>>([])

    init(store: IdempotencyStore) {
        self.store = store
    }

    /// A request's hold on its key while it runs.
    struct Claim: Sendable {
        fileprivate let owner: String
        fileprivate let key: String
        fileprivate let fingerprint: [UInt8]
        fileprivate let now: Int64
        /// Whether the answer was kept in the write's own transaction.
        fileprivate let kept = KeptFlag()
        fileprivate var slot: String { owner + "\u{0}" + key }
    }

    /// Whether a claim's answer was kept (shared by the copies of the claim).
    final class KeptFlag: Sendable {
        let value = Atomic<Bool>(false)
    }

    /// What to do with a `POST`.
    enum Start: Sendable {
        /// Answer with the kept first answer.
        case replay(HTTPResponse)
        /// Run it; the claim is settled with its answer (``settle(_:with:then:)``).
        case claimed(Claim)
    }

    /// Looks up the request's key: `nil` when it has none (or the caller is anonymous,
    /// which no `POST` accepts), else a replay or a claim.
    /// - Throws: 400 for a malformed key, 409 while the key's first request runs here, 422
    ///   when the key was used for another request; the store's error when it cannot say.
    func start(_ request: HTTPRequest, _ caller: Caller) throws -> Start? {
        guard let key = try Self.key(request),
            let owner = caller.keyID.map({ "key " + $0.rawValue }) ?? caller.userID.map({ "user " + $0.rawValue })
        else { return nil }
        let claim = Claim(owner: owner, key: key, fingerprint: Self.fingerprint(request), now: Timestamp.milliseconds(Date()))
        guard running.withLock({ $0.insert(claim.slot).inserted }) else { throw APIError.idempotencyKeyInUse }
        let answer: StoredAnswer?
        do {
            answer = try store.answer(caller: owner, key: key, now: claim.now)
        } catch {
            running.withLock { _ = $0.remove(claim.slot) }
            throw error
        }
        guard let answer else { return .claimed(claim) }
        running.withLock { _ = $0.remove(claim.slot) }
        guard Crypto.constantTimeEqual(answer.fingerprint, claim.fingerprint) else { throw APIError.idempotencyKeyReused }
        return .replay(
            HTTPResponse(
                status: HTTPStatus(code: answer.status),
                headers: answer.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, body: answer.body))
    }

    /// Keeps `response` for the claim's key inside the transaction of the write it answers
    /// (nothing for a failure or an answer too large to keep). When another request's
    /// answer for the key committed first (a duplicate that ran on another server), the
    /// write rolls back and is answered 409.
    func keep(_ claim: Claim, _ response: HTTPResponse, in transaction: TransactionAnswer.Capture) {
        guard let answer = keptAnswer(claim, response) else { return }
        transaction.keep(answer, caller: claim.owner, key: claim.key, now: claim.now)
        claim.kept.value.store(true, ordering: .relaxed)
    }

    /// Settles the claim once its request is answered: keeps `response` when it is a
    /// success not kept yet (an answer made without a write of its own, such as a backup's;
    /// `nil`: nothing to keep), releases the key, then calls `then`, also when keeping
    /// failed (only the replay is lost then).
    func settle(_ claim: Claim, with response: HTTPResponse?, then: @escaping @Sendable () -> Void) {
        guard !claim.kept.value.load(ordering: .relaxed), let answer = response.flatMap({ keptAnswer(claim, $0) }) else {
            running.withLock { _ = $0.remove(claim.slot) }
            return then()
        }
        store.store(answer, caller: claim.owner, key: claim.key, now: claim.now) { [self] _ in
            running.withLock { _ = $0.remove(claim.slot) }
            then()
        }
    }

    /// The answer to keep of `response`: a success no larger than ``maxStoredBody``.
    private func keptAnswer(_ claim: Claim, _ response: HTTPResponse) -> StoredAnswer? {
        guard (200..<300).contains(response.status.code), response.body.count <= Self.maxStoredBody else { return nil }
        let kept = ["Content-Type", "Location", "ETag"]
        let headers = Dictionary(response.headers.filter { kept.contains($0.name) }.map { ($0.name, $0.value) }) { $1 }
        return StoredAnswer(fingerprint: claim.fingerprint, status: response.status.code, headers: headers, body: response.body)
    }

    /// The request's key: `nil` without the field; 400 when it is repeated, empty, over
    /// ``maxKeyLength`` bytes or not visible ASCII. A structured-field string
    /// (`"…"`, as the draft writes it) and a bare token are both accepted.
    static func key(_ request: HTTPRequest) throws(APIError) -> String? {
        let values = request.headers.rawValues(for: "idempotency-key")
        guard let value = values.first else { return nil }
        var bytes = Array(value)
        if bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") { bytes = Array(bytes.dropFirst().dropLast()) }
        guard values.count == 1, (1...maxKeyLength).contains(bytes.count), bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") })
        else { throw APIError.invalidHeader("Idempotency-Key", "must be one value of 1 to \(maxKeyLength) visible ASCII characters.") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What makes two requests the same: method, target and body.
    private static func fingerprint(_ request: HTTPRequest) -> [UInt8] {
        var bytes = Array("\(request.method.rawValue) \(request.path)?\(request.query ?? "")\n".utf8)
        bytes += request.body
        return Crypto.sha256(bytes)
    }

}

extension APIError {
    /// 409: the first request with this key is still running.
    static let idempotencyKeyInUse = APIError(
        status: .conflict, code: "idempotencyKeyInUse",
        detail: "A request with this Idempotency-Key is still being processed; retry once it has been answered.")
    /// 422: the key was used for another request.
    static let idempotencyKeyReused = APIError(
        status: .unprocessableContent, code: "idempotencyKeyReused",
        detail: "This Idempotency-Key was used for a different request (method, target or body).")
}
