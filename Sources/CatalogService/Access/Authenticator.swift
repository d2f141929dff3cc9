import CatalogIdentity
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Synchronization

/// Turns a request's `Authorization: Bearer …` into a ``Caller``.
///
/// Both kinds of credential are remembered by a keyed digest of the token once checked, so
/// a key's later uses read nothing from the database and a token's signature is checked
/// once. Revoking a key, deleting a user or changing its role forgets what was
/// remembered before the change is answered, on every event loop at once (the memory is
/// shared); a lookup that raced with such a change is not remembered.
///
/// Servers that share their database with others (PostgreSQL) remember through a
/// ``CredentialWatch``: a change made through any server makes every server forget what
/// it remembered before that change is answered, and a server that cannot tell (its
/// lease with the database lapsed) reads each credential again until it can. Key-shaped
/// tokens that named no key are refused unread (no key can ever have their digest).
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
    /// What tells when remembered credentials may be used, where other servers change
    /// them too; `nil` where only this server does.
    private let watch: CredentialWatch?

    init(accounts: AccountStore, tokens: TokenVerifier?, watch: CredentialWatch?) {
        self.accounts = accounts
        self.tokens = tokens
        self.watch = watch
        watch?.start { [memory] in memory.forget { _ in true } }
    }

    /// Whether remembered credentials may be used now.
    private var remembers: Bool { watch?.isCurrent ?? true }

    /// Answers `done` once every server has forgotten what a credential change just
    /// committed made wrong: at once where only this server remembers, else from the
    /// watch's one poller thread, which serves every waiting change.
    func afterEveryServerForgets(_ done: @escaping @Sendable () -> Void) {
        guard let watch else { return done() }
        watch.afterEveryServer(done)
    }

    /// The caller `request` names: anonymous without `Authorization`.
    /// - Throws: 401 `invalidToken` for anything but one well-formed, valid bearer
    ///   credential; the store's error (503) when the database cannot say.
    func authenticate(_ request: HTTPRequest) throws -> Outcome {
        let fields = request.headers.rawValues(for: "authorization")
        guard let field = fields.first else { return .now(.anonymous) }
        guard fields.count == 1, let token = Self.bearerToken(field) else { throw APIError.invalidToken }
        let digest = memory.digest(of: token)
        let now = Self.milliseconds()
        if remembers, let remembered = memory.recall(digest, now: now) {
            recordUse(remembered.credential, lastRecorded: remembered.lastRecorded, digest: digest, now: now)
            return .now(Caller(remembered.credential))
        }
        let generation = memory.generation
        if APIKeySecret.looksLikeKey(token) {
            // A key refused once stays refused (no new key can have its digest): no second read.
            guard !memory.wasRefused(digest) else { throw APIError.invalidToken }
            guard let credential = try accounts.key(digest: Crypto.sha256(token)) else {
                memory.refuse(digest)
                throw APIError.invalidToken
            }
            if let expires = credential.expires, expires <= now { throw APIError.invalidToken }
            remember(digest, credential, until: credential.expires ?? .max, generation: generation)
            recordUse(credential, lastRecorded: credential.lastUsed ?? 0, digest: digest, now: now)
            return .now(Caller(credential))
        }
        guard let tokens, let identity = try? tokens.verify(token) else { throw APIError.invalidToken }
        let expires = Int64(min(identity.expires * 1000, Double(Int64.max / 2)))
        if let known = try accounts.user(issuer: identity.issuer, subject: identity.subject) {
            remember(digest, known, until: expires, generation: generation)
            return .now(Caller(known))
        }
        return .later { [self] finish in
            accounts.provision(issuer: identity.issuer, subject: identity.subject, email: identity.email) { result in
                if case let .success(credential) = result { self.remember(digest, credential, until: expires, generation: generation) }
                finish(result.map(Caller.init))
            }
        }
    }

    /// The caller `request` names when that is known without reading the database or
    /// checking a signature (for a request whose body has not arrived yet): anonymous
    /// without `Authorization`, or a credential remembered; `nil` when finding out takes
    /// more (a key not read yet, any key on a shared database, an identity token not
    /// checked yet), which the request's handler then does.
    /// - Throws: 401 `invalidToken` for a malformed field, and for a key-shaped token
    ///   known to name no key.
    func knownCaller(_ request: HTTPRequest) throws(APIError) -> Caller? {
        let fields = request.headers.rawValues(for: "authorization")
        guard let field = fields.first else { return .anonymous }
        guard fields.count == 1, let token = Self.bearerToken(field) else { throw .invalidToken }
        let digest = memory.digest(of: token)
        let now = Self.milliseconds()
        if remembers, let remembered = memory.recall(digest, now: now) {
            recordUse(remembered.credential, lastRecorded: remembered.lastRecorded, digest: digest, now: now)
            return Caller(remembered.credential)
        }
        if APIKeySecret.looksLikeKey(token), memory.wasRefused(digest) { throw .invalidToken }
        return nil
    }

    /// Forgets every credential of `user` (deleted, or its role changed).
    func forget(user: CatalogID) { memory.forget { $0.userID == user } }

    /// Forgets the API key `key` (revoked).
    func forget(key: CatalogID) { memory.forget { $0.keyID == key } }

    /// Forgets every identity token checked (the provider's keys were read again: some may be gone).
    func forgetIdentityTokens() { memory.forget { $0.keyID == nil } }

    private func remember(_ digest: CredentialMemory.Digest, _ credential: StoredCredential, until: Int64, generation: UInt64) {
        if remembers { memory.remember(digest, credential, until: until, generation: generation) }
    }

    /// Writes the key's last use when the last write (at `lastRecorded`) is older than the interval.
    private func recordUse(_ credential: StoredCredential, lastRecorded: Int64, digest: CredentialMemory.Digest, now: Int64) {
        guard let key = credential.keyID, now - lastRecorded >= Self.useRecordInterval else { return }
        memory.markRecorded(digest, at: now)
        accounts.recordUse(ofKey: key, at: now)
    }

    /// The token of `Bearer <token68>` (the scheme in any case, then one or more spaces),
    /// when well-formed and at most ``maxTokenBytes``.
    static func bearerToken(_ value: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        let range: Range<Int>? = value.withUnsafeBufferPointer { bytes in
            let scheme: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0x62, 0x65, 0x61, 0x72, 0x65, 0x72)  // "bearer"
            guard bytes.count > 7, bytes[0] | 0x20 == scheme.0, bytes[1] | 0x20 == scheme.1, bytes[2] | 0x20 == scheme.2,
                bytes[3] | 0x20 == scheme.3, bytes[4] | 0x20 == scheme.4, bytes[5] | 0x20 == scheme.5, bytes[6] == 0x20
            else { return nil }
            var start = 7, end = bytes.count
            while start < end, bytes[start] == 0x20 { start += 1 }
            guard start < end, end - start <= maxTokenBytes else { return nil }
            // token68: letters, digits and -._~+/, then optional padding.
            var index = start
            while index < end, isToken68(bytes[index]) { index += 1 }
            while index < end, bytes[index] == UInt8(ascii: "=") { index += 1 }
            guard index == end, bytes[start] != UInt8(ascii: "=") else { return nil }
            return start..<end
        }
        return range.map { value[(value.startIndex + $0.lowerBound)..<(value.startIndex + $0.upperBound)] }
    }

    /// Whether a token68 holds `byte` before its padding.
    @inline(__always) private static func isToken68(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E, 0x2B, 0x2F: true  // digits, letters, - . _ ~ + /
        default: false
        }
    }

    /// Milliseconds since 1970, from the system clock (no `Date` on the hot path).
    static func milliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

/// Checked credentials by a keyed digest of their token, shared by every event loop, with
/// at most `capacity` entries (when full, half are dropped: a credential is only checked
/// again), and as many key-shaped tokens that named no key. A generation number moves on
/// every forgetting, so a lookup that began before it is not remembered after it.
final class CredentialMemory: Sendable {
    /// A token's 128-bit digest under this memory's random key: two SipHash streams
    /// (Swift's `Hasher`, itself seeded at random per process) salted apart. No one who
    /// does not know the key can make a token whose digest is another's, and it costs
    /// some 300 instructions where the SHA-256 kept in the database costs 2,500 (only a
    /// token not remembered is hashed that way, to be looked up).
    struct Digest: Hashable, Sendable {
        let words: (UInt64, UInt64)

        static func == (lhs: Digest, rhs: Digest) -> Bool { lhs.words == rhs.words }

        func hash(into hasher: inout Hasher) { hasher.combine(words.0) }
    }

    /// The key of ``digest(of:)``.
    private let salts: (UInt64, UInt64) = {
        var random = SystemRandomNumberGenerator()
        return (random.next(), random.next())
    }()

    /// The digest `token` is remembered by.
    func digest(of token: ArraySlice<UInt8>) -> Digest {
        token.withUnsafeBytes { bytes in
            var first = Hasher(), second = Hasher()
            first.combine(salts.0)
            second.combine(salts.1)
            first.combine(bytes: bytes)
            second.combine(bytes: bytes)
            return Digest(words: (UInt64(bitPattern: Int64(first.finalize())), UInt64(bitPattern: Int64(second.finalize()))))
        }
    }

    struct Entry: Sendable {
        let credential: StoredCredential
        /// When it stops being valid, in milliseconds.
        let until: Int64
        /// When its use was last written.
        var lastRecorded: Int64
    }

    private struct State {
        var entries: [Digest: Entry] = [:]
        /// Key-shaped tokens that name no key.
        var refused: Set<Digest> = []
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var generation: UInt64 { state.withLock { $0.generation } }

    func recall(_ digest: Digest, now: Int64) -> Entry? {
        state.withLock { state in
            guard let entry = state.entries[digest] else { return nil }
            guard entry.until > now else {
                state.entries[digest] = nil
                return nil
            }
            return entry
        }
    }

    func remember(_ digest: Digest, _ credential: StoredCredential, until: Int64, generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= capacity {
                // Half of them go, in the dictionary's (unpredictable) order: checked again when used.
                for key in Array(state.entries.keys.prefix(capacity / 2)) { state.entries[key] = nil }
            }
            state.entries[digest] = Entry(credential: credential, until: until, lastRecorded: credential.lastUsed ?? 0)
        }
    }

    func wasRefused(_ digest: Digest) -> Bool {
        state.withLock { $0.refused.contains(digest) }
    }

    func refuse(_ digest: Digest) {
        state.withLock { state in
            if state.refused.count >= capacity { state.refused.removeAll(keepingCapacity: true) }
            state.refused.insert(digest)
        }
    }

    func markRecorded(_ digest: Digest, at time: Int64) {
        state.withLock { $0.entries[digest]?.lastRecorded = time }
    }

    func forget(where matches: (StoredCredential) -> Bool) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { !matches($0.value.credential) }
        }
    }
}
