import CTLS
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a certificate and private key could not be loaded.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    /// The file that failed (the certificate's or the key's).
    public let file: String
    /// OpenSSL's reason (never any key material).
    public let reason: String

    public var description: String { "cannot use \(file): \(reason)" }
}

/// The server's TLS identity: a certificate chain and its private key, read from PEM
/// files, with Mozilla's "intermediate" settings: TLS 1.2 and 1.3, its cipher suites in
/// its order (ChaCha20 first for clients that prefer it), no compression, no
/// renegotiation, ALPN `http/1.1`, session tickets under keys that rotate every hour.
///
/// ``reload()`` reads the files again while the server runs: new handshakes use the
/// new pair, connections already open keep theirs, and a pair that fails to load
/// leaves the one in use in place.
public final class TLSContext: Sendable {
    /// The PEM file of the certificate, followed by any intermediate certificates.
    public let certificateFile: String
    /// The PEM file of the certificate's private key (not encrypted).
    public let privateKeyFile: String
    private let current: Mutex<Context>

    /// An `SSL_CTX` pointer, owned (one reference) by whoever holds this box.
    private struct Context: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    /// Loads the pair; throws naming the file that failed.
    public init(certificateFile: String, privateKeyFile: String) throws(TLSError) {
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
        current = Mutex(try Self.load(certificateFile: certificateFile, privateKeyFile: privateKeyFile))
    }

    deinit {
        current.withLock { SSL_CTX_free($0.pointer) }
    }

    /// Reads both files again and makes the pair the one new handshakes use. On failure
    /// the pair in use stays, and the error names the file.
    public func reload() throws(TLSError) {
        let fresh = try Self.load(certificateFile: certificateFile, privateKeyFile: privateKeyFile)
        let old = current.withLock { context -> Context in
            let old = context
            context = fresh
            return old
        }
        SSL_CTX_free(old.pointer)  // connections made with it hold references of their own
    }

    /// Replaces the session ticket key with a new one. The replaced key still opens the
    /// tickets it sealed until the next rotation, so a ticket lives one to two rotations.
    /// Keys also rotate on their own every hour.
    public static func rotateTicketKeys() {
        ctls_rotate_ticket_keys()
    }

    /// When the certificate new handshakes present stops being valid (`nil` when unknown).
    public var certificateExpiry: Date? {
        let seconds = current.withLock { ctls_certificate_not_after($0.pointer) }
        return seconds == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// A server-side session for the accepted socket `fd`, or `nil` when OpenSSL has no memory.
    func makeSession(fd: Int32) -> TLSSession? {
        let ssl = current.withLock { SSL_new($0.pointer) }
        guard let ssl else {
            ERR_clear_error()  // not to be taken for a later connection's error
            return nil
        }
        guard SSL_set_fd(ssl, fd) == 1 else {
            SSL_free(ssl)
            ERR_clear_error()
            return nil
        }
        SSL_set_accept_state(ssl)
        return TLSSession(ssl)
    }

    private static func load(certificateFile: String, privateKeyFile: String) throws(TLSError) -> Context {
        ERR_clear_error()
        guard let context = ctls_server_context() else {
            throw TLSError(file: certificateFile, reason: "OpenSSL cannot make a TLS context: \(takeError().text)")
        }
        // Files are checked for reading first: OpenSSL's reason for a missing file is vague.
        for file in [certificateFile, privateKeyFile] where access(file, R_OK) != 0 {
            let reason = String(cString: strerror(errno))
            SSL_CTX_free(context)
            throw TLSError(file: file, reason: reason)
        }
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            SSL_CTX_free(context)
            throw TLSError(file: certificateFile, reason: "not a PEM certificate chain (\(takeError().text))")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) == 1, SSL_CTX_check_private_key(context) == 1 else {
            let reason = takeError().text
            SSL_CTX_free(context)
            throw TLSError(
                file: privateKeyFile,
                reason: reason.contains("mismatch") || reason.contains("does not match")
                    ? "the private key does not match the certificate in \(certificateFile)"
                    : "not an unencrypted PEM private key (\(reason))")
        }
        return Context(pointer: context)
    }

    /// The oldest error OpenSSL queued on this thread (the queue is then cleared).
    static func takeError() -> (text: String, reason: Int32) {
        var reason: Int32 = 0
        let text = String(cString: ctls_take_error(&reason))
        return (text, reason)
    }
}
