import CCrypto
import CatalogSchema

/// A public key from a JSON Web Key Set (RFC 7517), with the one algorithm it verifies:
/// RS256 for an RSA key of at least 2,048 bits, ES256 for a P-256 key. The algorithm
/// comes from the key, never from a token's header.
public final class VerificationKey: @unchecked Sendable {
    // An EVP_PKEY is immutable once built; OpenSSL 3 allows verifying with it from
    // several threads at once, each with its own digest context.

    /// The signature algorithms the catalog accepts.
    public enum Algorithm: String, Sendable {
        /// RSASSA-PKCS1-v1_5 with SHA-256.
        case rs256 = "RS256"
        /// ECDSA on P-256 with SHA-256.
        case es256 = "ES256"
    }

    /// The key's id (`kid`).
    public let id: String
    /// What it verifies.
    public let algorithm: Algorithm
    private let key: OpaquePointer

    /// Why a JWK was refused.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        /// The reason.
        public let description: String
    }

    /// Reads one JWK: `kty` `RSA` (`n`, `e`) or `EC` (`crv` `P-256`, `x`, `y`), with a
    /// `kid`; `use`, when present, must be `sig`, and `alg`, when present, must be the
    /// key's own algorithm.
    package init(jwk: [String: JSONValue]) throws(Invalid) {
        guard case let .string(id)? = jwk["kid"], !id.isEmpty else { throw Invalid(description: "a key without a kid") }
        if let use = jwk["use"], use != .string("sig") { throw Invalid(description: "key \(id): use is not sig") }
        func bytes(_ name: String) throws(Invalid) -> [UInt8] {
            guard case let .string(text)? = jwk[name], let bytes = Base64URL.decode(text.utf8), !bytes.isEmpty else {
                throw Invalid(description: "key \(id): \(name) is missing or not base64url")
            }
            return bytes
        }
        let algorithm: Algorithm
        let key: OpaquePointer
        switch jwk["kty"] {
        case .string("RSA")?:
            algorithm = .rs256
            let modulus = try bytes("n"), exponent = try bytes("e")
            guard let built = ccrypto_rsa_public_key(modulus, modulus.count, exponent, exponent.count) else {
                ERR_clear_error()
                throw Invalid(description: "key \(id): not a valid RSA public key")
            }
            key = built
            guard EVP_PKEY_get_bits(key) >= 2048 else {
                EVP_PKEY_free(key)
                throw Invalid(description: "key \(id): an RSA key of under 2048 bits")
            }
        case .string("EC")?:
            guard jwk["crv"] == .string("P-256") else { throw Invalid(description: "key \(id): only the P-256 curve is accepted") }
            let x = try bytes("x"), y = try bytes("y")
            guard x.count == 32, y.count == 32 else { throw Invalid(description: "key \(id): x and y must be 32 bytes") }
            algorithm = .es256
            let point: [UInt8] = [0x04] + x + y
            guard let built = ccrypto_p256_public_key(point, point.count) else {
                ERR_clear_error()
                throw Invalid(description: "key \(id): not a valid P-256 public key")
            }
            key = built
        default:
            throw Invalid(description: "key \(id): kty must be RSA or EC")
        }
        if let alg = jwk["alg"], alg != .string(algorithm.rawValue) {
            EVP_PKEY_free(key)
            throw Invalid(description: "key \(id): alg does not match the key")
        }
        self.id = id
        self.algorithm = algorithm
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` (as a JWS carries it: PKCS #1 for RS256, `r‖s` for ES256)
    /// signs `message` under this key.
    func verifies(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        defer { ERR_clear_error() }
        let encoded: [UInt8]
        switch algorithm {
        case .rs256:
            encoded = signature
        case .es256:
            guard signature.count == 64, let der = Self.derSignature(signature) else { return false }
            encoded = der
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return encoded.withUnsafeBufferPointer { signature in
            message.withUnsafeBufferPointer { message in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count) == 1
            }
        }
    }

    /// The DER `ECDSA-Sig-Value` of a JWS ES256 signature (`r‖s`, 32 bytes each).
    private static func derSignature(_ raw: [UInt8]) -> [UInt8]? {
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = BN_bin2bn(raw, 32, nil), s = BN_bin2bn(Array(raw[32...]), 32, nil)
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }
}

/// The keys of a JWKS document (`{"keys":[…]}`), by `kid`.
public struct KeySet: Sendable {
    /// The keys by id.
    public let keys: [String: VerificationKey]

    /// Reads a JWKS document. Keys of other types or curves are refused, not skipped:
    /// a key set is configuration, and a mistake in it should be seen at once.
    public init(json: [UInt8]) throws(VerificationKey.Invalid) {
        guard case let .object(document)? = try? JSONValue.parse(json), case let .array(entries)? = document["keys"] else {
            throw VerificationKey.Invalid(description: "not a JWKS document ({\"keys\": [...]})")
        }
        var keys: [String: VerificationKey] = [:]
        for entry in entries {
            guard case let .object(jwk) = entry else { throw VerificationKey.Invalid(description: "a key that is not an object") }
            let key = try VerificationKey(jwk: jwk)
            guard keys[key.id] == nil else { throw VerificationKey.Invalid(description: "two keys with kid \(key.id)") }
            keys[key.id] = key
        }
        self.keys = keys
    }
}
