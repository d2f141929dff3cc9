import ArgumentParser
import Foundation

/// `catalog-server healthcheck`: exits 0 when the server on this machine answers
/// `GET /healthz` with 200 (for Docker's `HEALTHCHECK`, which has no curl). It checks
/// the port the server reads, `CATALOG_PORT` (default 8080), over TLS when
/// `CATALOG_TLS_CERTIFICATE` is set (or with `--tls`).
struct Healthcheck: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Exit 0 if the server on 127.0.0.1:$CATALOG_PORT (default 8080) answers /healthz, else 1.")

    @Option(help: "Seconds to wait for the answer.")
    var timeout = 3.0

    @Flag(help: "Speak TLS (the default when CATALOG_TLS_CERTIFICATE is set); the certificate is not verified.")
    var tls = false

    func run() throws {
        let server = try Settings.localServer(tls: tls)
        guard let answer = HealthProbe.get(port: server.port, tls: server.tls, path: "/healthz", timeout: timeout),
            answer.hasPrefix("HTTP/1.1 200 ")
        else {
            FileHandle.standardError.write(Data("catalog-server: no healthy answer on 127.0.0.1:\(server.port)\(server.tls ? " over TLS" : "")\n".utf8))
            throw ExitCode.failure
        }
        say("healthy")
    }
}
