import CCrypto
import Foundation

/// A signing key made in the test with libcrypto (RSA 2048 or P-256), its JWK, and
/// compact JWTs signed with it: what an identity provider would issue.
public final class TokenSigner: @unchecked Sendable {
    public enum Kind: Sendable { case rsa, ec }

    public let kind: Kind
    public let kid: String
    private let key: OpaquePointer

    /// A new key pair.
    public init(_ kind: Kind, kid: String) {
        self.kind = kind
        self.kid = kid
        let context = EVP_PKEY_CTX_new_from_name(nil, kind == .rsa ? "RSA" : "EC", nil)
        defer { EVP_PKEY_CTX_free(context) }
        precondition(EVP_PKEY_keygen_init(context) == 1)
        switch kind {
        case .rsa: precondition(EVP_PKEY_CTX_set_rsa_keygen_bits(context, 2048) == 1)
        case .ec: precondition(EVP_PKEY_CTX_set_group_name(context, "prime256v1") == 1)
        }
        var key: OpaquePointer?
        precondition(EVP_PKEY_generate(context, &key) == 1)
        self.key = key!
    }

    /// A new key pair, made on a thread of its own: RSA key generation takes up to seconds,
    /// which must not hold a thread of the cooperative pool.
    public static func make(_ kind: Kind, kid: String) async throws -> TokenSigner {
        try await onThread { TokenSigner(kind, kid: kid) }
    }

    deinit { EVP_PKEY_free(key) }

    /// The public key as a JWK.
    public var jwk: [String: String] {
        switch kind {
        case .rsa:
            ["kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": Self.base64URL(number("n")), "e": Self.base64URL(number("e"))]
        case .ec:
            ["kty": "EC", "kid": kid, "crv": "P-256", "x": Self.base64URL(Array(point[1...32])), "y": Self.base64URL(Array(point[33...64]))]
        }
    }

    /// A JWKS document holding `signers`' public keys.
    public static func keySet(_ signers: [TokenSigner]) -> Data {
        (try? JSONSerialization.data(withJSONObject: ["keys": signers.map(\.jwk)])) ?? Data()
    }

    /// `header.payload.signature`, signed with this key (RS256 or ES256) unless `alg`
    /// names another algorithm, which only goes into the header.
    public func token(_ claims: [String: Any], header: [String: Any]? = nil) -> String {
        let header = header ?? ["alg": kind == .rsa ? "RS256" : "ES256", "kid": kid, "typ": "JWT"]
        let signingInput = Self.base64URL(Self.json(header)) + "." + Self.base64URL(Self.json(claims))
        return signingInput + "." + Self.base64URL(sign(Array(signingInput.utf8)))
    }

    /// The signature of `message` (PKCS #1 v1.5 or `r‖s`) with SHA-256.
    public func sign(_ message: [UInt8]) -> [UInt8] {
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        precondition(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1)
        var length = 0
        precondition(EVP_DigestSign(context, nil, &length, message, message.count) == 1)
        var signature = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(context, &signature, &length, message, message.count) == 1)
        signature.removeSubrange(length...)
        guard kind == .ec else { return signature }
        // DER ECDSA-Sig-Value → r‖s, 32 bytes each.
        var cursor: UnsafePointer<UInt8>? = signature.withUnsafeBufferPointer { $0.baseAddress }
        let parsed = signature.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        defer { ECDSA_SIG_free(parsed) }
        var r: OpaquePointer?, s: OpaquePointer?
        ECDSA_SIG_get0(parsed, &r, &s)
        var raw = [UInt8](repeating: 0, count: 64)
        raw.withUnsafeMutableBufferPointer { buffer in
            _ = BN_bn2binpad(r, buffer.baseAddress, 32)
            _ = BN_bn2binpad(s, buffer.baseAddress! + 32, 32)
        }
        return raw
    }

    /// HMAC-SHA-256 of `message` keyed with `secret` (for the HS256 forgery).
    public static func hmacSHA256(_ message: [UInt8], secret: [UInt8]) -> [UInt8] {
        var key = secret.count > 64 ? digest(secret) : secret
        key += [UInt8](repeating: 0, count: 64 - key.count)
        return digest(key.map { $0 ^ 0x5C } + digest(key.map { $0 ^ 0x36 } + message))
    }

    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        _ = EVP_Digest(bytes, bytes.count, &output, nil, EVP_sha256(), nil)
        return output
    }

    public static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    private func number(_ name: String) -> [UInt8] {
        var number: OpaquePointer?
        precondition(EVP_PKEY_get_bn_param(key, name, &number) == 1)
        defer { BN_free(number) }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(number) + 7) / 8))
        _ = BN_bn2bin(number, &bytes)
        return bytes
    }

    private var point: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 65)
        var length = 0
        precondition(EVP_PKEY_get_octet_string_param(key, "pub", &bytes, 65, &length) == 1 && length == 65)
        return bytes
    }
}
