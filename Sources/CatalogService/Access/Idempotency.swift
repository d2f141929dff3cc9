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
/// live in the database (``IdempotencyStore``), so they survive restarts. Only
/// successful answers are kept: a failure is decided again on a retry.
final class Idempotency: Sendable {
    /// The longest key accepted, in bytes.
    static let maxKeyLength = 255
    /// The largest answer kept; a larger one is answered but not replayable.
    static let maxStoredBody = 1 << 20

    private let store: IdempotencyStore
    /// Keys whose first request is running, as `caller NUL key`.
    private let running = Mutex<Set<String>>([])

    init(store: IdempotencyStore) {
        self.store = store
    }

    /// `endpoint` (a `POST`'s) run at most once per key.
    func wrap(_ endpoint: Endpoint) -> Endpoint {
        .later { [self] request, caller, done in
            guard let key = try Self.key(request) else { return try Self.run(endpoint, request, caller, done) }
            guard let owner = caller.keyID.map({ "key " + $0.rawValue }) ?? caller.userID.map({ "user " + $0.rawValue }) else {
                return try Self.run(endpoint, request, caller, done)
            }
            let fingerprint = Self.fingerprint(request)
            let now = Timestamp.milliseconds(Date())
            let slot = owner + "\u{0}" + key
            guard running.withLock({ $0.insert(slot).inserted }) else { throw APIError.idempotencyKeyInUse }
            do {
                if let answer = try store.answer(caller: owner, key: key, now: now) {
                    running.withLock { _ = $0.remove(slot) }
                    guard Crypto.constantTimeEqual(answer.fingerprint, fingerprint) else { throw APIError.idempotencyKeyReused }
                    return done(.success(HTTPResponse(status: HTTPStatus(code: answer.status),
                                                      headers: answer.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                                                      body: answer.body)))
                }
                try Self.run(endpoint, request, caller) { [self] result in
                    guard case let .success(response) = result, (200..<300).contains(response.status.code),
                          response.body.count <= Self.maxStoredBody else {
                        running.withLock { _ = $0.remove(slot) }
                        return done(result)
                    }
                    let kept = ["Content-Type", "Location", "ETag"]
                    let headers = Dictionary(response.headers.filter { kept.contains($0.name) }.map { ($0.name, $0.value) }) { $1 }
                    let answer = StoredAnswer(fingerprint: fingerprint, status: response.status.code, headers: headers, body: response.body)
                    store.store(answer, caller: owner, key: key, now: now) { [self] _ in
                        // Stored or not, the answer goes out (a failed store only loses the replay).
                        running.withLock { _ = $0.remove(slot) }
                        done(result)
                    }
                }
            } catch {
                running.withLock { _ = $0.remove(slot) }
                throw error
            }
        }
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

    /// Runs `endpoint` and hands its answer to `done`, whatever kind it is.
    private static func run(_ endpoint: Endpoint, _ request: HTTPRequest, _ caller: Caller, _ done: @escaping Completion) throws {
        switch endpoint {
        case let .inline(body), let .read(_, body):
            done(.success(try body(request, caller)))
        case let .later(body):
            try body(request, caller, done)
        case let .blocking(body):
            guard Handler.runBlocking({ done(Result { try body(request, caller) }) }) else { throw WorkPool.busy }
        }
    }
}

extension APIError {
    /// 409: the first request with this key is still running.
    static let idempotencyKeyInUse = APIError(status: .conflict, code: "idempotencyKeyInUse",
                                              detail: "A request with this Idempotency-Key is still being processed; retry once it has been answered.")
    /// 422: the key was used for another request.
    static let idempotencyKeyReused = APIError(status: .unprocessableContent, code: "idempotencyKeyReused",
                                               detail: "This Idempotency-Key was used for a different request (method, target or body).")
}
