import CCrypto

/// The primitives of OpenSSL's libcrypto the catalog uses: random bytes, SHA-256 (and
/// HMAC over it) and constant-time comparison.
public enum Crypto {
    /// A failure of libcrypto itself (its random generator could not be seeded, say).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What failed.
        public let description: String
    }

    /// `count` bytes from OpenSSL's CSPRNG (`RAND_bytes`).
    public static func randomBytes(_ count: Int) throws(Failure) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let status = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard status == 1 else {
            ERR_clear_error()
            throw Failure(description: "RAND_bytes failed")
        }
        return bytes
    }

    /// SHA-256, fetched from the default provider once: OpenSSL 3 looks an algorithm up
    /// again on every use of `EVP_sha256()` (about ten thousand instructions a digest).
    nonisolated(unsafe) private static let sha256Algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA2-256", nil)

    /// The SHA-256 digest of `bytes` (on a digest context each thread keeps).
    public static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let hash = { (input: UnsafeRawBufferPointer) in
            _ = digest.withUnsafeMutableBufferPointer { output in
                if let algorithm = sha256Algorithm {
                    ccrypto_sha256(algorithm, input.baseAddress, input.count, output.baseAddress)
                } else {
                    EVP_Digest(input.baseAddress, input.count, output.baseAddress, nil, EVP_sha256(), nil)
                }
            }
        }
        if bytes.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0)) }) == nil {
            Array(bytes).withUnsafeBytes(hash)
        }
        return digest
    }

    /// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
    public static func hmacSHA256(key: [UInt8], _ message: some Collection<UInt8>) -> [UInt8] {
        let block = 64
        var padded = key.count > block ? sha256(key) : key
        padded += [UInt8](repeating: 0, count: block - padded.count)
        let inner = sha256(padded.map { $0 ^ 0x36 } + Array(message))
        return sha256(padded.map { $0 ^ 0x5c } + inner)
    }

    /// Whether `a` and `b` are equal, in time that depends only on their length
    /// (`CRYPTO_memcmp`): for comparing secrets and their digests.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { a in b.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 } }
    }

    /// Lowercase hexadecimal.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }
}

/// Base64url without padding (RFC 4648 §5), as JWTs and JWKs use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// The unpadded encoding of `bytes`.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        var output: [UInt8] = []
        output.reserveCapacity((input.count * 4 + 2) / 3)
        var index = 0
        while index < input.count {
            let chunk = input[index..<min(index + 3, input.count)]
            var group = 0
            for (offset, byte) in chunk.enumerated() { group |= Int(byte) << (16 - 8 * offset) }
            for position in 0...chunk.count { output.append(alphabet[(group >> (18 - 6 * position)) & 0x3F]) }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes `text` encodes; `nil` when it holds padding, a character outside the
    /// alphabet, an impossible length, or non-zero unused bits (one text per value).
    public static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        let input = Array(text)
        guard input.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count * 3 / 4)
        var buffer = 0, bits = 0
        for byte in input {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            buffer = (buffer << 6) | Int(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8((buffer >> bits) & 0xFF))
                buffer &= (1 << bits) - 1
            }
        }
        guard buffer == 0 else { return nil }
        return output
    }
}
