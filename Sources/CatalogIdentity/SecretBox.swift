import CCrypto
import Foundation

/// Seals secrets the server must read back (webhook signing secrets) so that the database
/// never holds them in plain text: AES-256-GCM under a key derived from a key file, with
/// a random nonce per seal and the owner's id as associated data (a sealed secret moved to
/// another row does not open). A sealed value is `0x01 ‖ nonce (12) ‖ ciphertext ‖ tag (16)`.
public struct SecretBox: Sendable {
    /// A failure to read the key file, or to open a sealed value (another key, or tampering).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    private let key: [UInt8]

    /// A box whose key is derived from `material` (a key file's bytes, at least 32).
    public init(material: [UInt8]) throws(Failure) {
        guard material.count >= 32 else { throw Failure(description: "A secrets key needs at least 32 bytes; this one has \(material.count).") }
        key = Crypto.hmacSHA256(key: material, Array("catalog sealed secrets v1".utf8))
    }

    /// The box of the key file at `path`. When `create` and there is no file, one of 32
    /// random bytes is made first: written whole to a file of its own (mode 0600), synced,
    /// then linked into place, so that a crash leaves no half-written key and two starting
    /// servers never each make one (the second links nothing and reads the first's).
    public static func load(file path: String, create: Bool) throws -> SecretBox {
        if create, !FileManager.default.fileExists(atPath: path) {
            let bytes = try Crypto.randomBytes(32)
            let temporary = path + ".\(Crypto.hex(try Crypto.randomBytes(6))).new"
            let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Failure(description: "The secrets key \(path) could not be created: \(String(cString: strerror(errno))).") }
            defer { unlink(temporary) }
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count && fsync(fd) == 0
            Glibc.close(fd)
            guard written else { throw Failure(description: "The secrets key \(path) could not be written.") }
            guard link(temporary, path) == 0 || errno == EEXIST else {
                throw Failure(description: "The secrets key \(path) could not be put in place: \(String(cString: strerror(errno))).")
            }
            let folder = Glibc.open((path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY)
            if folder >= 0 {
                fsync(folder)
                Glibc.close(folder)
            }
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw Failure(description: "The secrets key \(path) cannot be read.") }
        return try SecretBox(material: Array(data))
    }

    /// Whether the file at `path` may be read by others than its owner.
    public static func isExposed(file path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & 0o077 != 0
    }

    /// `plaintext`, sealed for the owner `context`.
    public func seal(_ plaintext: [UInt8], context: String) throws(Failure) -> [UInt8] {
        let nonce: [UInt8]
        do { nonce = try Crypto.randomBytes(12) } catch { throw Failure(description: error.description) }
        guard let sealed = Self.run(encrypt: true, key: key, nonce: nonce, aad: Array(context.utf8), input: plaintext, tag: nil) else {
            throw Failure(description: "The secret could not be sealed.")
        }
        return [1] + nonce + sealed.output + sealed.tag
    }

    /// What `sealed` holds, when it was sealed by this key for `context`.
    public func open(_ sealed: [UInt8], context: String) throws(Failure) -> [UInt8] {
        guard sealed.count >= 1 + 12 + 16, sealed[0] == 1 else { throw Failure(description: "The sealed secret is malformed.") }
        let nonce = Array(sealed[1..<13]), tag = Array(sealed.suffix(16)), ciphertext = Array(sealed[13..<(sealed.count - 16)])
        guard let opened = Self.run(encrypt: false, key: key, nonce: nonce, aad: Array(context.utf8), input: ciphertext, tag: tag) else {
            throw Failure(description: "The sealed secret does not open with this key (another --webhook-key-file?).")
        }
        return opened.output
    }

    /// One AES-256-GCM pass; `nil` on failure (for decryption: a tag that does not match).
    private static func run(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: [UInt8], input: [UInt8], tag: [UInt8]?) -> (output: [UInt8], tag: [UInt8])? {
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let initialize = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex
        let update = encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate
        var length: Int32 = 0
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var tag = tag ?? [UInt8](repeating: 0, count: 16)
        guard initialize(context, EVP_aes_256_gcm(), nil, nil, nil) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil) == 1,
            initialize(context, nil, nil, key, nonce) == 1,
            aad.isEmpty || update(context, nil, &length, aad, Int32(aad.count)) == 1,
            update(context, &output, &length, input, Int32(input.count)) == 1
        else { return nil }
        var total = Int(length)
        if encrypt {
            guard output.withUnsafeMutableBufferPointer({ EVP_EncryptFinal_ex(context, $0.baseAddress! + total, &length) }) == 1,
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1
            else { return nil }
        } else {
            guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1,
                output.withUnsafeMutableBufferPointer({ EVP_DecryptFinal_ex(context, $0.baseAddress! + total, &length) }) == 1
            else { return nil }
        }
        total += Int(length)
        return (Array(output[..<total]), tag)
    }
}

/// Signing as the Standard Webhooks specification says: secrets are `whsec_` and the
/// base64 of their key; a message's signature is `v1,` and the base64 of HMAC-SHA256 of
/// `{webhook-id}.{webhook-timestamp}.{body}` under that key.
public enum WebhookSigning {
    /// A new secret: its text (shown once) and its key (32 random bytes).
    public static func newSecret() throws -> (text: String, key: [UInt8]) {
        let key = try Crypto.randomBytes(32)
        return ("whsec_" + Data(key).base64EncodedString(), key)
    }

    /// The key of the secret `text`; `nil` when it is not one.
    public static func key(of text: String) -> [UInt8]? {
        guard text.hasPrefix("whsec_"), let data = Data(base64Encoded: String(text.dropFirst(6))), !data.isEmpty else { return nil }
        return Array(data)
    }

    /// `v1,<signature>` of the message `id` sent at `timestamp` (seconds) with `body`.
    public static func signature(key: [UInt8], id: String, timestamp: Int64, body: [UInt8]) -> String {
        "v1," + Data(Crypto.hmacSHA256(key: key, Array("\(id).\(timestamp).".utf8) + body)).base64EncodedString()
    }
}
