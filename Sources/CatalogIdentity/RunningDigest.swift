import CCrypto

/// A digest computed a piece at a time (OpenSSL's `EVP_DigestUpdate`), for bodies too
/// large to hold: an upload's chunk as it arrives, a file sent to the object store.
public final class RunningDigest: @unchecked Sendable {
    /// The algorithms: SHA-256, and SHA-1 (which the tus checksum extension requires of every server).
    public enum Algorithm: String, Sendable, CaseIterable {
        case sha256, sha1

        /// OpenSSL's name for it.
        var openSSLName: String { self == .sha256 ? "SHA2-256" : "SHA1" }
        /// The digest's length in bytes.
        public var length: Int { self == .sha256 ? 32 : 20 }
    }

    public let algorithm: Algorithm
    private let context: OpaquePointer?

    /// A new digest of `algorithm`.
    public init(_ algorithm: Algorithm) {
        self.algorithm = algorithm
        context = EVP_MD_CTX_new()
        let method = EVP_MD_fetch(nil, algorithm.openSSLName, nil)
        EVP_DigestInit_ex(context, method, nil)
        EVP_MD_free(method)
    }

    /// Adds `bytes`.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
    }

    /// The digest of everything added (the digest is then spent).
    public func finish() -> [UInt8] {
        var output = [UInt8](repeating: 0, count: algorithm.length)
        var length: UInt32 = 0
        _ = output.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        return output
    }

    deinit {
        EVP_MD_CTX_free(context)
    }
}
