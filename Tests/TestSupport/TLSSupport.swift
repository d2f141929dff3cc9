import CTLS
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Starts `process`.
public func launch(_ process: ChildProcess) throws {
    try process.run()
}

/// Certificates made with the `openssl` CLI once per test run (P-256 keys, as Mozilla's
/// intermediate profile recommends): a CA; a server certificate for `localhost` and
/// `127.0.0.1` (CN `localhost`); a second one with the same names (CN `catalog-renewed`)
/// and its own key; an expired one on the first key; and a key that matches none.
public struct TestCertificates: Sendable {
    public let directory: String
    public var caFile: String { directory + "/ca.pem" }
    public var certificateFile: String { directory + "/server.pem" }
    public var keyFile: String { directory + "/server.key" }
    public var renewedCertificateFile: String { directory + "/renewed.pem" }
    public var renewedKeyFile: String { directory + "/renewed.key" }
    public var expiredCertificateFile: String { directory + "/expired.pem" }
    public var strayKeyFile: String { directory + "/stray.key" }

    /// The certificates of this test run (made on first use).
    public static func shared() throws -> TestCertificates {
        try made.withLock { made in
            if let made { return made }
            let certificates = try make()
            made = certificates
            return certificates
        }
    }

    private static let made = Mutex<TestCertificates?>(nil)

    /// The CA and the first server certificate come from `.ci/certificate.sh`, the recipe
    /// the TLS checks and benchmarks use; the others are made here on its CA and `leaf.cnf`.
    private static func make() throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".ci/certificate.sh").path
        let (status, output) = try runCommand("/bin/bash", [script, directory])
        guard status == 0 else { throw Loopback.Failure(description: "\(script) failed: \(output)") }
        let sign = ["x509", "-req", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-extfile", "leaf.cnf"]
        try openssl(
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "renewed.key", "-out", "renewed.csr",
                "-subj", "/CN=catalog-renewed",
            ], in: directory)
        try openssl(sign + ["-in", "renewed.csr", "-days", "90", "-out", "renewed.pem"], in: directory)
        // Valid until the day before it was made.
        try openssl(sign + ["-in", "server.csr", "-days", "-1", "-out", "expired.pem"], in: directory)
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "stray.key"], in: directory)
        for file in ["renewed.key", "stray.key"] { chmod(directory + "/" + file, 0o600) }
        return TestCertificates(directory: directory)
    }

    /// Copies `certificate` and `key` over `certificateTarget` and `keyTarget`, as a
    /// renewal does, the key with `keyMode`.
    public static func install(
        _ certificate: String, _ key: String, at certificateTarget: String, _ keyTarget: String,
        keyMode: mode_t = 0o600
    ) throws {
        for (from, to) in [(certificate, certificateTarget), (key, keyTarget)] {
            try? FileManager.default.removeItem(atPath: to)
            try FileManager.default.copyItem(atPath: from, toPath: to)
        }
        chmod(keyTarget, keyMode)
    }

    /// Runs the `openssl` CLI in `directory`; throws with its output when it fails.
    private static func openssl(_ arguments: [String], in directory: String) throws {
        let (status, output) = try runCommand("/usr/bin/openssl", arguments, in: directory)
        guard status == 0 else { throw Loopback.Failure(description: "openssl \(arguments.joined(separator: " ")) failed: \(output)") }
    }
}

/// Runs a program to its end (call it from a thread of its own: see ``onThread(_:)``),
/// feeding it `input`; returns its exit status and what it printed on standard output
/// and standard error together.
public func runCommand(
    _ path: String, _ arguments: [String], in directory: String? = nil, input: String = "",
    environment: [String: String]? = nil
) throws -> (status: Int32, output: String) {
    let process = ChildProcess()
    // `env -C` changes directory in the child: Foundation's `currentDirectoryURL` is not
    // used, as `Process.run()` crashed now and then in tests that spawn while others work.
    process.executableURL = URL(fileURLWithPath: directory == nil ? path : "/usr/bin/env")
    process.arguments = directory.map { ["-C", $0, path] + arguments } ?? arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    let feed = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = feed
    try launch(process)
    feed.fileHandleForWriting.write(Data(input.utf8))
    try feed.fileHandleForWriting.close()
    let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, printed)
}

/// A blocking TLS client on a connected socket, for tests: OpenSSL's client with ALPN
/// `http/1.1`, verifying the server against a CA file (or not at all).
public final class TLSClient: @unchecked Sendable {
    private let context: OpaquePointer
    private let ssl: OpaquePointer

    /// How a read ended when it returned no bytes.
    public enum End: Error, Equatable, Sendable {
        /// The server sent close_notify.
        case closeNotify
        /// The stream ended without close_notify.
        case eof
        /// A receive timeout or an error.
        case failure(String)
    }

    /// Completes a handshake on `fd`, offering `session` for resumption.
    public init(fd: Int32, caFile: String?, serverName: String = "localhost", session: TLSClientSession? = nil) throws {
        guard let context = ctls_client_context(caFile) else { throw Loopback.Failure(description: "no client context") }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            throw Loopback.Failure(description: "SSL_new failed")
        }
        self.context = context
        self.ssl = ssl
        _ = ctls_set_server_name(ssl, serverName)
        SSL_set_fd(ssl, fd)
        // A copy each time: OpenSSL's client marks a TLS 1.3 session used once as spent.
        if let session, let copy = SSL_SESSION_dup(session.pointer) {
            SSL_set_session(ssl, copy)
            SSL_SESSION_free(copy)
        }
        guard SSL_connect(ssl) == 1 else {
            var reason: Int32 = 0
            throw Loopback.Failure(description: "TLS handshake failed: \(String(cString: ctls_take_error(&reason)))")
        }
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    public func write(_ bytes: [UInt8]) throws {
        var written = 0
        guard bytes.isEmpty || bytes.withUnsafeBytes({ SSL_write_ex(ssl, $0.baseAddress, $0.count, &written) }) == 1 else {
            var reason: Int32 = 0
            throw Loopback.Failure(description: "TLS write failed: \(String(cString: ctls_take_error(&reason)))")
        }
    }

    /// Reads some bytes; `.success([])` never happens: an empty read is an ``End``.
    public func read(max: Int = 65536) -> Result<[UInt8], End> {
        var buffer = [UInt8](repeating: 0, count: max)
        var count = 0
        var result: Int32
        var error: Int32 = SSL_ERROR_NONE
        var code: Int32 = 0
        repeat {
            ERR_clear_error()
            result = buffer.withUnsafeMutableBytes { SSL_read_ex(ssl, $0.baseAddress, $0.count, &count) }
            if result != 1 {
                error = SSL_get_error(ssl, result)
                code = errno
            }
            // A signal another test sends this process (SIGUSR2) may interrupt the wait.
        } while result != 1 && error == SSL_ERROR_SYSCALL && code == EINTR
        if result == 1 { return .success(Array(buffer[0..<count])) }
        var reason: Int32 = 0
        let text = String(cString: ctls_take_error(&reason))
        switch error {
        case SSL_ERROR_ZERO_RETURN: return .failure(.closeNotify)
        case SSL_ERROR_SYSCALL where code == 0 || code == ECONNRESET: return .failure(.eof)
        case SSL_ERROR_SSL where text.contains("unexpected eof"): return .failure(.eof)
        default: return .failure(.failure("SSL error \(error), errno \(code): \(text)"))
        }
    }

    /// The negotiated ALPN protocol ("" when none).
    public var alpn: String {
        var buffer = [CChar](repeating: 0, count: 64)
        ctls_alpn(ssl, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether the handshake resumed a session.
    public var sessionReused: Bool { SSL_session_reused(ssl) == 1 }

    /// The negotiated protocol version, such as `TLSv1.3`.
    public var version: String { String(cString: SSL_get_version(ssl)) }

    /// The common name of the server's certificate.
    public var peerCommonName: String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        var buffer = [CChar](repeating: 0, count: 256)
        guard X509_NAME_get_text_by_NID(X509_get_subject_name(certificate), NID_commonName, &buffer, Int32(buffer.count)) > 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The session to resume later (TLS 1.3 tickets arrive after the handshake: read a
    /// response first).
    public var session: TLSClientSession? {
        guard let session = SSL_get1_session(ssl) else { return nil }
        return TLSClientSession(session)
    }
}

/// A client session kept for resumption.
public final class TLSClientSession: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { SSL_SESSION_free(pointer) }
}
