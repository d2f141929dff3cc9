import Foundation
import TestSupport
import Testing

@testable import HTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// `GET /hello`, as the TLS tests send it.
private let helloRequest = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"

/// The TLS listener: the handshake inside the event loops and under the head timeout,
/// what clients and external tools see, bad input, resumption and certificate reload.
/// (Keep-alive, pipelining, parser limits, timeouts and the drain run over TLS in the
/// suites that test them in plaintext.)
@Suite struct TLSTests {
    /// Reads what the server sends until it closes (or `seconds` pass).
    private static func drain(_ fd: Int32, seconds: Double = 5) -> (bytes: [UInt8], closed: Bool) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += chunk[0..<count]; continue }
            return (received, count == 0 || errno == ECONNRESET)
        }
    }

    /// The first bytes of a TLS ClientHello record announcing 512 bytes, of which only these arrive.
    private static let truncatedClientHello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03] + [UInt8](repeating: 0x2A, count: 32)

    private static func sendRaw(_ fd: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    @Test func theHandshakeNegotiatesTLS13WithALPNAndAVerifiedCertificate() async throws {
        let server = try TestServer(.tls)
        try await onThread {
            let client = try server.client()
            #expect(client.tls?.alpn == "http/1.1")
            #expect(client.tls?.version == "TLSv1.3")
            #expect(client.tls?.peerCommonName == "localhost")
            try client.send(helloRequest)
            #expect(try client.readResponse().text == "hello")
        }
    }

    @Test func theHandshakeCountsAgainstTheHeadTimeout() async throws {
        let server = try TestServer(.tls) { $0.headTimeout = .seconds(1) }
        let (status, elapsed) = try await onThread { () -> (Int, Double) in
            let start = Date()
            let client = try server.client()
            usleep(850_000)
            try client.send("GET /hello HTTP/1.1\r\n")
            return (try client.readResponse().status, Date().timeIntervalSince(start))
        }
        #expect(status == 408)
        // Over plaintext the head's own second would start with its first byte (about 1.85 s).
        #expect(elapsed < 1.6, "the first head's time started at the connection (\(elapsed) s)")
    }

    @Test func clientsStoppedMidHandshakeAreClosedAtTheHeadTimeoutWhileOthersAreServed() async throws {
        let server = try TestServer(.tls) { $0.headTimeout = .milliseconds(700) }
        try await onThread {
            let stalled = try (0..<50).map { index -> Int32 in
                let fd = try Loopback.connect(port: server.port, source: "127.0.2.\(index % 5 + 1)")
                Self.sendRaw(fd, Self.truncatedClientHello)
                return fd
            }
            defer { for descriptor in stalled { close(descriptor) } }
            // One loop thread: a stalled handshake must not hold it.
            for _ in 0..<5 {
                let client = try server.client()
                try client.send(helloRequest)
                #expect(try client.readResponse().status == 200)
            }
            for fd in stalled {
                let (bytes, closed) = Self.drain(fd)
                #expect(closed)
                #expect(bytes.isEmpty || bytes.first == 0x15, "nothing but a TLS alert")
            }
        }
        for _ in 0..<50 where server.server.openConnections > 0 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(server.server.openConnections == 0)
    }

    @Test func plaintextHTTPIsAnswered400InPlaintextAndClosed() async throws {
        let server = try TestServer(.tls)
        let text = try await Loopback.exchange(port: server.port, Array(helloRequest.utf8))
        #expect(text.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        #expect(text.contains("Connection: close\r\n"))
        #expect(text.contains(#""code":"plainHTTPOnTLSPort""#))
        #expect(server.server.failedHandshakes == 1)
    }

    @Test(arguments: ["garbage", "truncated hello then close", "empty then close"])
    func badInputGetsACleanCloseAndCostsNothing(_ input: String) async throws {
        let server = try TestServer(.tls)
        try await onThread {
            let fd = try Loopback.connect(port: server.port)
            defer { close(fd) }
            switch input {
            case "garbage":
                var generator = SeededGenerator(seed: 13)
                Self.sendRaw(fd, (0..<2000).map { _ in UInt8.random(in: 0...255, using: &generator) })
            case "truncated hello then close":
                Self.sendRaw(fd, Self.truncatedClientHello)
                shutdown(fd, Int32(SHUT_WR))
            default:
                shutdown(fd, Int32(SHUT_WR))
            }
            let (bytes, closed) = Self.drain(fd)
            #expect(closed)
            #expect(bytes.isEmpty || (bytes.first == 0x15 && bytes.count <= 7), "at most one TLS alert: \(bytes.prefix(16))")
            let client = try server.client()
            try client.send(helloRequest)
            #expect(try client.readResponse().status == 200)
        }
        for _ in 0..<50 where server.server.openConnections > 0 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(server.server.openConnections == 0)
    }

    @Test func anIncompleteRecordWaitsForTheSocketInsteadOfSpinning() async throws {
        let server = try TestServer(.tls)
        try await onThread {
            let client = try server.client()
            try client.send(helloRequest)
            #expect(try client.readResponse().status == 200)
            // An application-data record that announces 16 KiB, of which one byte arrives.
            Self.sendRaw(client.fd, [0x17, 0x03, 0x03, 0x40, 0x00, 0x2A])
            usleep(300_000)
            let passes = server.server.core.bufferedReadPasses.load(ordering: .relaxed)
            #expect(passes < 5, "the loop re-read a partial record \(passes) times")
            let other = try server.client()
            try other.send(helloRequest)
            #expect(try other.readResponse().status == 200)
        }
    }

    @Test func gracefulClosesSendCloseNotify() async throws {
        let server = try TestServer(.tls) { $0.keepAliveTimeout = .milliseconds(300) }
        try await onThread {
            let idle = try server.client()
            try idle.send(helloRequest)
            _ = try idle.readResponse()
            #expect(idle.waitForClose())
            #expect(idle.end == .closeNotify, "the keep-alive timeout closes with close_notify")
            let closing = try server.client()
            try closing.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            _ = try closing.readResponse()
            #expect(closing.waitForClose())
            #expect(closing.end == .closeNotify)
        }
    }

    @Test func largeResponsesAndBodiesCrossManyRecords() async throws {
        // Not a test of deadlines: a loaded machine may take a while to send 60 KB three times.
        let server = try TestServer(.tls) {
            $0.headTimeout = .seconds(10)
            $0.bodyTimeout = .seconds(10)
        }
        try await onThread {
            let client = try server.client()
            let body = String((0..<60_000).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
            for _ in 0..<3 {
                try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                #expect(try client.readResponse().text == body)
            }
        }
    }

    @Test func reloadSwitchesCertificatesWhileOpenConnectionsKeepWorking() async throws {
        let certificates = try TestCertificates.shared()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-reload-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = directory + "/server.pem", key = directory + "/server.key"
        @Sendable func install(_ source: String, _ sourceKey: String) throws {
            try TestCertificates.install(source, sourceKey, at: certificate, key)
        }
        try install(certificates.certificateFile, certificates.keyFile)
        let context = try TLSContext(certificateFile: certificate, privateKeyFile: key)
        var configuration = TestServer.configuration { $0.keepAliveTimeout = .seconds(30) }
        configuration.tls = context
        let server = try HTTPServer(configuration: configuration, router: TestServer.router())
        try server.start()
        defer { server.shutdown() }
        try await onThread {
            let open = try RawClient(port: server.port, caFile: certificates.caFile)
            #expect(open.tls?.peerCommonName == "localhost")
            try install(certificates.renewedCertificateFile, certificates.renewedKeyFile)
            try context.reload()
            let renewed = try RawClient(port: server.port, caFile: certificates.caFile)
            #expect(renewed.tls?.peerCommonName == "catalog-renewed")
            for client in [open, renewed] {
                try client.send(helloRequest)
                #expect(try client.readResponse().status == 200)
            }
            // A key that does not match, then a file that is no certificate: the pair in use stays.
            try install(certificates.certificateFile, certificates.strayKeyFile)
            do throws(TLSError) {
                try context.reload()
                Issue.record("a key that does not match was accepted")
            } catch {
                #expect(error.file == key)
                #expect(error.reason.contains("does not match"))
            }
            try "not a certificate".write(toFile: certificate, atomically: true, encoding: .utf8)
            do throws(TLSError) {
                try context.reload()
                Issue.record("a broken certificate file was accepted")
            } catch {
                #expect(error.file == certificate)
            }
            #expect(try RawClient(port: server.port, caFile: certificates.caFile).tls?.peerCommonName == "catalog-renewed")
            try open.send(helloRequest)
            #expect(try open.readResponse().status == 200, "the first connection still works")
        }
    }

    @Test func anExpiredCertificateLoadsButClientsRefuseIt() async throws {
        let certificates = try TestCertificates.shared()
        let context = try TLSContext(certificateFile: certificates.expiredCertificateFile, privateKeyFile: certificates.keyFile)
        #expect(try #require(context.certificateExpiry) < Date())
        var configuration = TestServer.configuration()
        configuration.tls = context
        let server = try HTTPServer(configuration: configuration, router: TestServer.router())
        try server.start()
        defer { server.shutdown() }
        let (status, output) = try await onThread {
            try runCommand("/usr/bin/curl", ["-sS", "--cacert", certificates.caFile, "https://localhost:\(server.port)/hello"])
        }
        #expect(status == 60, "curl: peer certificate cannot be authenticated")
        #expect(output.contains("expired"))
    }

    // MARK: External clients

    @Test func curlVerifiesTheCertificateAndReusesOneConnection() async throws {
        let server = try TestServer(.tls)
        let certificates = try TestCertificates.shared()
        let url = "https://localhost:\(server.port)/items/"
        let (status, output) = try await onThread {
            try runCommand("/usr/bin/curl", ["-sS", "-v", "--cacert", certificates.caFile, url + "1", url + "2"])
        }
        #expect(status == 0, "\(output)")
        #expect(output.contains("SSL certificate verify ok"))
        #expect(output.contains("ALPN: server accepted http/1.1"))
        #expect(output.contains("Re-using existing connection"))
        #expect(output.contains("12"), "both bodies")
    }

    @Test(arguments: [
        ("TLSv1", "refused TLSV1_ALERT_PROTOCOL_VERSION"), ("TLSv1_1", "refused TLSV1_ALERT_PROTOCOL_VERSION"),
        ("TLSv1_2", "accepted TLSv1.2 http/1.1"), ("TLSv1_3", "accepted TLSv1.3 http/1.1"),
    ])
    func pythonSeesOnlyTLS12And13(_ version: String, _ expected: String) async throws {
        let server = try TestServer(.tls)
        let certificates = try TestCertificates.shared()
        // The client offers the old versions at security level 0, so a refusal is the server's.
        let script = """
            import socket, ssl, sys, warnings
            warnings.simplefilter("ignore")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.load_verify_locations(sys.argv[3])
            context.set_ciphers("DEFAULT:@SECLEVEL=0")
            context.set_alpn_protocols(["http/1.1"])
            context.minimum_version = context.maximum_version = getattr(ssl.TLSVersion, sys.argv[2])
            try:
                with context.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5), server_hostname="localhost") as tls:
                    print("accepted", tls.version(), tls.selected_alpn_protocol())
            except ssl.SSLError as error:
                print("refused", error.reason)
            """
        let (_, output) = try await onThread {
            try runCommand("/usr/bin/env", ["python3", "-c", script, String(server.port), version, certificates.caFile])
        }
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == expected)
    }
}

/// Session resumption: the ticket keys are the process's, so these run one at a time.
@Suite(.serialized) struct TLSResumptionTests {
    @Test func sessionsResumeAcrossOneTicketKeyRotationButNotTwo() async throws {
        let server = try TestServer(.tls)
        let certificates = try TestCertificates.shared()
        try await onThread {
            func connect(resuming session: TLSClientSession?) throws -> TLSClient {
                let fd = try Loopback.connect(port: server.port)
                let client = try TLSClient(fd: fd, caFile: certificates.caFile, session: session)
                try client.write(Array(helloRequest.utf8))
                _ = client.read()  // the response; TLS 1.3 tickets arrive with it
                close(fd)
                return client
            }
            let first = try connect(resuming: nil)
            #expect(!first.sessionReused)
            let session = try #require(first.session)
            #expect(try connect(resuming: session).sessionReused)
            #expect(try connect(resuming: session).sessionReused)
            TLSContext.rotateTicketKeys()
            #expect(try connect(resuming: session).sessionReused, "the previous key still opens its tickets")
            TLSContext.rotateTicketKeys()
            #expect(try !connect(resuming: session).sessionReused, "two rotations later the ticket is refused: a full handshake")
        }
    }

    @Test func opensslSClientReportsALPNAndAReusedSession() async throws {
        let server = try TestServer(.tls)
        let certificates = try TestCertificates.shared()
        let sessionFile = certificates.directory + "/session-\(UUID().uuidString).pem"
        let address = "127.0.0.1:\(server.port)"
        let (first, second, old) = try await onThread { () -> (String, String, String) in
            let request = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let first = try runCommand(
                "/usr/bin/openssl",
                [
                    "s_client", "-connect", address, "-CAfile", certificates.caFile, "-alpn", "http/1.1",
                    "-sess_out", sessionFile, "-ign_eof",
                ], input: request
            ).output
            let second = try runCommand(
                "/usr/bin/openssl",
                [
                    "s_client", "-connect", address, "-CAfile", certificates.caFile,
                    "-sess_in", sessionFile, "-ign_eof",
                ], input: request
            ).output
            let old = try runCommand("/usr/bin/openssl", ["s_client", "-connect", address, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"]).output
            return (first, second, old)
        }
        #expect(first.contains("ALPN protocol: http/1.1"))
        #expect(first.contains("Verify return code: 0 (ok)"))
        #expect(first.contains("HTTP/1.1 200 OK"))
        #expect(second.contains("Reused, TLSv1.3"))
        #expect(old.contains("alert protocol version"))
    }
}
