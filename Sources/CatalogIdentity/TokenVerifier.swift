import CatalogSchema
import Foundation
import Synchronization

/// Who a verified identity token names: the pair (`iss`, `sub`), with the `email` claim
/// when there is one, and when the token stops being valid.
public struct VerifiedIdentity: Sendable, Hashable {
    /// The issuer (`iss`).
    public let issuer: String
    /// The subject (`sub`): the user's id at the issuer.
    public let subject: String
    /// The `email` claim, when `email_verified` is the JSON value `true` (not a string,
    /// a number or absent: only a provider that says it checked the address is believed).
    public let email: String?
    /// `exp`, in seconds since 1970.
    public let expires: Double
}

/// Verifies signed identity tokens (JWS compact JWTs, RFC 7519) from an identity
/// provider: RS256 or ES256 signatures under a key of the configured JWKS chosen by
/// `kid`, with the algorithm taken from the key (never from the header, so `none` and
/// HS256 keyed with a public key are refused); `iss` one of the configured issuers,
/// `aud` one of the configured audiences, `exp` and `nbf` with at most 60 s of leeway.
public final class TokenVerifier: Sendable {
    /// Why a token was refused (never shown to the client, which sees only `invalid_token`).
    public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
        /// The reason.
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The most leeway `exp` and `nbf` get.
    public static let maxLeeway: Double = 60

    private let keys: Mutex<KeySet>
    private let issuers: Set<String>
    private let audiences: Set<String>
    private let leeway: Double

    /// A verifier over `keys` accepting tokens from `issuers` for `audiences`.
    public init(keys: KeySet, issuers: [String], audiences: [String], leeway: Double = maxLeeway) {
        self.keys = Mutex(keys)
        self.issuers = Set(issuers)
        self.audiences = Set(audiences)
        self.leeway = min(max(leeway, 0), Self.maxLeeway)
    }

    /// Replaces the key set (a JWKS file read again).
    public func replaceKeys(_ keys: KeySet) {
        self.keys.withLock { $0 = keys }
    }

    /// How many keys it holds.
    public var keyCount: Int { keys.withLock { $0.keys.count } }

    /// The identity `token` names, if it is valid at `now` (seconds since 1970).
    public func verify(_ token: some Collection<UInt8>, now: Double = Date().timeIntervalSince1970) throws(Rejection) -> VerifiedIdentity {
        let bytes = Array(token)
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Rejection("not a JWS compact serialization") }
        guard let headerBytes = Base64URL.decode(parts[0]), case let .object(header)? = try? JSONValue.parse(headerBytes) else {
            throw Rejection("the header is not a base64url JSON object")
        }
        guard case let .string(alg)? = header["alg"] else { throw Rejection("no alg") }
        guard header["crit"] == nil else { throw Rejection("critical header extensions are not supported") }
        guard case let .string(kid)? = header["kid"] else { throw Rejection("no kid") }
        guard let key = keys.withLock({ $0.keys[kid] }) else { throw Rejection("unknown kid") }
        guard alg == key.algorithm.rawValue else { throw Rejection("alg \(alg.prefix(16)) is not the key's algorithm") }
        guard let signature = Base64URL.decode(parts[2]) else { throw Rejection("the signature is not base64url") }
        let signed = Array(bytes[bytes.startIndex..<parts[1].endIndex])
        guard key.verifies(signature, of: signed) else { throw Rejection("bad signature") }
        guard let payloadBytes = Base64URL.decode(parts[1]), case let .object(claims)? = try? JSONValue.parse(payloadBytes) else {
            throw Rejection("the payload is not a base64url JSON object")
        }
        return try check(claims, now: now)
    }

    private func check(_ claims: [String: JSONValue], now: Double) throws(Rejection) -> VerifiedIdentity {
        guard case let .string(issuer)? = claims["iss"], issuers.contains(issuer) else { throw Rejection("wrong iss") }
        let audience: [JSONValue] =
            switch claims["aud"] {
            case let .string(one)?: [.string(one)]
            case let .array(many)?: many
            default: []
            }
        guard audience.contains(where: { if case let .string(name) = $0 { audiences.contains(name) } else { false } }) else {
            throw Rejection("wrong aud")
        }
        guard case let .number(expires)? = claims["exp"], expires.isFinite else { throw Rejection("no exp") }
        guard now < expires + leeway else { throw Rejection("expired") }
        if let notBefore = claims["nbf"] {
            guard case let .number(start) = notBefore, start.isFinite else { throw Rejection("nbf is not a number") }
            guard now >= start - leeway else { throw Rejection("not valid yet") }
        }
        guard case let .string(subject)? = claims["sub"], !subject.isEmpty, subject.utf8.count <= 255 else { throw Rejection("no sub") }
        var email: String?
        if case let .string(text)? = claims["email"], claims["email_verified"] == .bool(true) {
            email = text
        }
        return VerifiedIdentity(issuer: issuer, subject: subject, email: email, expires: expires)
    }
}
