import Foundation
import ServiceTestSupport
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `catalog-server` with `--tls-certificate` and `--tls-private-key`: startup checks,
/// the health check, HSTS, and SIGHUP reloads that keep open connections.
@Suite struct TLSExecutableTests {
    private static func serverRun(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
        try await onThread { try runCommand(Executables.server.path, arguments, environment: environment) }
    }

    /// The lines of `file` once one of them contains `text` (or after 10 s).
    private static func waitForLine(containing text: String, in file: String) async throws -> [String] {
        for _ in 0..<200 {
            let lines = (try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
            if lines.contains(where: { $0.contains(text) }) { return lines }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw Loopback.Failure(description: "no line containing '\(text)' in \(file)")
    }

    @Test func badTLSFilesStopStartupWithOneLineNamingTheFile() async throws {
        let certificates = try TestCertificates.shared()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tls-start-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let common = ["--port", "0", "--database", directory + "/catalog.sqlite", "--migrations", migrationsDirectory.path]
        let missing = directory + "/missing.key"
        for (arguments, named) in [
            (["--tls-certificate", certificates.certificateFile, "--tls-private-key", missing], missing),
            (["--tls-certificate", certificates.certificateFile, "--tls-private-key", certificates.strayKeyFile], certificates.strayKeyFile),
            (["--tls-certificate", certificates.keyFile, "--tls-private-key", certificates.keyFile], certificates.keyFile),
            (["--tls-certificate", certificates.certificateFile], "--tls-private-key"),
        ] {
            let (status, output) = try await Self.serverRun(common + arguments)
            #expect(status == 64, "\(arguments)")
            let lines = output.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains(named), "one line naming \(named): \(output)")
            #expect(!output.contains("PRIVATE KEY"), "no key material")
        }
        let (status, output) = try await Self.serverRun(
            common,
            environment: [
                "CATALOG_TLS_CERTIFICATE": certificates.certificateFile, "CATALOG_TLS_PRIVATE_KEY": certificates.strayKeyFile,
            ])
        #expect(status == 64)
        #expect(output.contains("does not match the certificate"))
    }

    @Test func theServerReloadsItsCertificateOnSIGHUPWithoutDroppingConnections() async throws {
        let certificates = try TestCertificates.shared()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tls-run-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = directory + "/tls.pem", key = directory + "/tls.key", log = directory + "/server.log"
        @Sendable func install(_ source: String, _ sourceKey: String, keyMode: mode_t = 0o600) throws {
            try TestCertificates.install(source, sourceKey, at: certificate, key, keyMode: keyMode)
        }
        try install(certificates.certificateFile, certificates.keyFile, keyMode: 0o644)
        #expect(FileManager.default.createFile(atPath: log, contents: nil))
        let port = try Executables.freePort()
        let process = ChildProcess()
        process.executableURL = Executables.server
        process.arguments = [
            "--port", String(port), "--database", directory + "/catalog.sqlite", "--migrations", migrationsDirectory.path,
            "--tls-certificate", certificate, "--tls-private-key", key, "--hsts", "--keep-alive-timeout", "60",
        ]
        process.standardOutput = FileHandle(forWritingAtPath: log)
        process.standardError = process.standardOutput
        try launch(process)
        defer { if process.isRunning { process.terminate() } }
        let started = try await Self.waitForLine(containing: "listening on https://127.0.0.1:\(port)", in: log)
        #expect(started.contains { $0.contains("warning") && $0.contains("\(key) is readable by its group or others (mode 644)") })

        // The health check speaks TLS when the certificate is configured, as in the image.
        let health = try await onThread {
            try runCommand(Executables.server.path, ["healthcheck"], environment: ["CATALOG_PORT": String(port), "CATALOG_TLS_CERTIFICATE": certificate])
        }
        #expect(health.status == 0 && health.output == "healthy\n", "\(health.output)")

        try await onThread {
            let request = Array("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
            func connect() throws -> (Int32, TLSClient) {
                let fd = try Loopback.connect(port: port)
                return (fd, try TLSClient(fd: fd, caFile: certificates.caFile))
            }
            func get(_ client: TLSClient) throws -> String {
                try client.write(request)
                guard case let .success(bytes) = client.read() else { throw Loopback.Failure(description: "no response") }
                return String(decoding: bytes, as: UTF8.self)
            }
            let (openFD, open) = try connect()
            defer { close(openFD) }
            #expect(open.peerCommonName == "localhost")
            let first = try get(open)
            #expect(first.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(first.contains("Strict-Transport-Security: max-age=63072000\r\n"))

            try install(certificates.renewedCertificateFile, certificates.renewedKeyFile)
            kill(process.processIdentifier, SIGHUP)
        }
        let reloaded = try await Self.waitForLine(containing: "reloaded the TLS certificate", in: log)
        #expect(reloaded.filter { $0.contains("reloaded the TLS certificate") }.count == 1)
        #expect(!reloaded.contains { $0.contains("identity keys") }, "no JWKS configured: nothing said about it")
        try await onThread {
            let fd = try Loopback.connect(port: port)
            defer { close(fd) }
            #expect(try TLSClient(fd: fd, caFile: certificates.caFile).peerCommonName == "catalog-renewed")
        }

        // A broken file at reload keeps the pair in use and says so in one line.
        try "not a certificate\n".write(toFile: certificate, atomically: true, encoding: .utf8)
        kill(process.processIdentifier, SIGHUP)
        let kept = try await Self.waitForLine(containing: "kept the TLS certificate in use", in: log)
        let errors = kept.filter { $0.contains("kept the TLS certificate in use") }
        #expect(errors.count == 1 && errors[0].contains("error") && errors[0].contains(certificate))
        try await onThread {
            let fd = try Loopback.connect(port: port)
            defer { close(fd) }
            #expect(try TLSClient(fd: fd, caFile: certificates.caFile).peerCommonName == "catalog-renewed")
        }
        #expect(process.isRunning)
        kill(process.processIdentifier, SIGTERM)
        try await onThread { process.waitUntilExit() }
        #expect(process.terminationStatus == 0)
        let everything = try String(contentsOfFile: log, encoding: .utf8)
        #expect(!everything.contains("PRIVATE KEY") && !everything.contains("BEGIN"), "no key or certificate material in the log")
    }
}
