import CatalogIdentity
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Synchronization

/// Turns a request's `Authorization: Bearer …` into a ``Caller``.
///
/// Both kinds of credential are remembered by the SHA-256 of the token once checked, so
/// a key's later uses read nothing from the database and a token's signature is checked
/// once. Revoking a key, deleting a user or changing its role forgets what was
/// remembered before the change is answered, on every event loop at once (the memory is
/// shared); a lookup that raced with such a change is not remembered.
final class Authenticator: Sendable {
    /// The longest token read; longer ones are refused unread.
    static let maxTokenBytes = 8192
    /// How often a key's last use is written at most, in milliseconds.
    static let useRecordInterval: Int64 = 60_000

    /// What checking a credential gives: a caller now, or (for an identity token whose
    /// user does not exist yet) once the user is created.
    enum Outcome {
        case now(Caller)
        case later(@Sendable (@escaping @Sendable (Result<Caller, any Error>) -> Void) -> Void)
    }

    private let accounts: AccountStore
    private let tokens: TokenVerifier?
    private let memory = CredentialMemory(capacity: 10_000)

    init(accounts: AccountStore, tokens: TokenVerifier?) {
        self.accounts = accounts
        self.tokens = tokens
    }

    /// The caller `request` names: anonymous without `Authorization`.
    /// - Throws: 401 `invalidToken` for anything but one well-formed, valid bearer credential.
    func authenticate(_ request: HTTPRequest) throws(APIError) -> Outcome {
        let fields = request.headers.rawValues(for: "authorization")
        guard let field = fields.first else { return .now(.anonymous) }
        guard fields.count == 1, let token = Self.bearerToken(field) else { throw .invalidToken }
        let digest = Crypto.sha256(token)
        let now = Timestamp.milliseconds(Date())
        if let remembered = memory.recall(digest, now: now) {
            recordUse(remembered, digest: digest, now: now)
            return .now(Caller(remembered.credential))
        }
        let generation = memory.generation
        if APIKeySecret.looksLikeKey(token) {
            guard let credential = try? accounts.key(digest: digest) else { throw .invalidToken }
            if let expires = credential.expires, expires <= now { throw .invalidToken }
            memory.remember(digest, credential, until: credential.expires ?? .max, generation: generation)
            recordUse(memory.recall(digest, now: now), digest: digest, now: now)
            return .now(Caller(credential))
        }
        guard let tokens, let identity = try? tokens.verify(token) else { throw .invalidToken }
        let expires = Int64(min(identity.expires * 1000, Double(Int64.max / 2)))
        let known: StoredCredential?
        do { known = try accounts.user(issuer: identity.issuer, subject: identity.subject) } catch { throw .invalidToken }
        if let known {
            memory.remember(digest, known, until: expires, generation: generation)
            return .now(Caller(known))
        }
        return .later { [accounts, memory] finish in
            accounts.provision(issuer: identity.issuer, subject: identity.subject, email: identity.email) { result in
                if case let .success(credential) = result { memory.remember(digest, credential, until: expires, generation: generation) }
                finish(result.map(Caller.init))
            }
        }
    }

    /// Forgets every credential of `user` (deleted, or its role changed).
    func forget(user: CatalogID) { memory.forget { $0.userID == user } }

    /// Forgets the API key `key` (revoked).
    func forget(key: CatalogID) { memory.forget { $0.keyID == key } }

    /// Writes the key's last use when the last write is older than the interval.
    private func recordUse(_ remembered: CredentialMemory.Entry?, digest: [UInt8], now: Int64) {
        guard let remembered, let key = remembered.credential.keyID, now - remembered.lastRecorded >= Self.useRecordInterval else { return }
        memory.markRecorded(digest, at: now)
        accounts.recordUse(ofKey: key, at: now)
    }

    /// The token of `Bearer <token68>` (the scheme in any case, then one or more spaces),
    /// when well-formed and at most ``maxTokenBytes``.
    static func bearerToken(_ value: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        let scheme = Array("bearer".utf8)
        guard value.count > scheme.count + 1, zip(value.prefix(scheme.count), scheme).allSatisfy({ $0 | 0x20 == $1 }) else { return nil }
        var rest = value.dropFirst(scheme.count)
        guard rest.first == UInt8(ascii: " ") else { return nil }
        while rest.first == UInt8(ascii: " ") { rest = rest.dropFirst() }
        while rest.last == UInt8(ascii: " ") || rest.last == UInt8(ascii: "\t") { rest = rest.dropLast() }
        guard !rest.isEmpty, rest.count <= maxTokenBytes else { return nil }
        // token68: letters, digits and -._~+/, then optional padding.
        var padding = false
        for byte in rest {
            let isPad = byte == UInt8(ascii: "=")
            if padding && !isPad { return nil }
            padding = padding || isPad
            guard isPad || ASCIIClass.isToken68(byte) else { return nil }
        }
        return rest
    }
}

/// Byte classes for credentials.
private enum ASCIIClass {
    static func isToken68(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
            || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
    }
}

/// Checked credentials by the SHA-256 of their token, shared by every event loop, with
/// at most `capacity` entries (when full, it starts again empty: a credential is only
/// checked again). A generation number moves on every forgetting, so a lookup that
/// began before it is not remembered after it.
final class CredentialMemory: Sendable {
    struct Entry: Sendable {
        let credential: StoredCredential
        /// When it stops being valid, in milliseconds.
        let until: Int64
        /// When its use was last written.
        var lastRecorded: Int64
    }

    private struct State {
        var entries: [[UInt8]: Entry] = [:]
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var generation: UInt64 { state.withLock { $0.generation } }

    func recall(_ digest: [UInt8], now: Int64) -> Entry? {
        state.withLock { state in
            guard let entry = state.entries[digest] else { return nil }
            guard entry.until > now else {
                state.entries[digest] = nil
                return nil
            }
            return entry
        }
    }

    func remember(_ digest: [UInt8], _ credential: StoredCredential, until: Int64, generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[digest] = Entry(credential: credential, until: until, lastRecorded: 0)
        }
    }

    func markRecorded(_ digest: [UInt8], at time: Int64) {
        state.withLock { $0.entries[digest]?.lastRecorded = time }
    }

    func forget(where matches: (StoredCredential) -> Bool) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { !matches($0.value.credential) }
        }
    }
}
