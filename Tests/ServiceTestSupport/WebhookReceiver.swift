import Foundation
import TestSupport
import Testing

/// A real Standard Webhooks receiver (`Tests/Fixtures/webhook_receiver.py`, which verifies
/// every message with the reference library, PyPI `standardwebhooks`) on a loopback port,
/// as a child process; what it received is read from its log.
package final class WebhookReceiver: @unchecked Sendable {
    package let process = ChildProcess()
    package let directory: URL
    package let port: Int
    package let host: String
    /// Whether it serves https (with `--tls-cert`).
    package let tls: Bool

    /// The script.
    package static let script = migrationsDirectory.deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/webhook_receiver.py")

    /// Starts a receiver on `host` with the script's `options` (`--fail-first 3`, `--hang`, …).
    package init(host: String = "127.0.0.1", _ options: [String] = []) async throws {
        self.host = host
        tls = options.contains("--tls-cert")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-receiver-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let portFile = directory.appendingPathComponent("port")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            [
                "python3", Self.script.path, "--host", host, "--port", "0", "--port-file", portFile.path, "--log", directory.appendingPathComponent("log.jsonl").path,
                "--secrets-file", directory.appendingPathComponent("secrets").path, "--connection-log", directory.appendingPathComponent("connections").path,
                "--delay-file", directory.appendingPathComponent("delay").path, "--exit-with-parent",
            ] + options
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: Self.touch(directory.appendingPathComponent("stderr")))
        try process.run()
        var found: Int?
        for _ in 0..<200 where found == nil {
            found = (try? String(contentsOf: portFile, encoding: .utf8)).flatMap { Int($0) }
            if found == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        port = try #require(found, "the receiver started: \((try? String(contentsOf: directory.appendingPathComponent("stderr"), encoding: .utf8)) ?? "")")
    }

    private static func touch(_ url: URL) -> URL {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        return url
    }

    /// Its URL (https with `--tls-cert`).
    package var url: String { "\(tls ? "https" : "http")://\(host):\(port)/hooks" }

    /// Makes these the secrets it verifies with (in order: their indices are what a
    /// message's `verified` lists).
    package func trust(_ secrets: [String]) throws {
        try Data(secrets.joined(separator: "\n").utf8).write(to: directory.appendingPathComponent("secrets"), options: .atomic)
    }

    /// Answers each request read from now on `seconds` after its first byte arrived, in
    /// place of the `--delay` it started with (0: at once). Answers on one connection still
    /// leave in order, so one held answer holds those behind it.
    package func delayAnswers(by seconds: Double) throws {
        try Data("\(seconds)".utf8).write(to: directory.appendingPathComponent("delay"), options: .atomic)
    }

    /// One request it received.
    package struct Received: Decodable, Sendable {
        package let id: String?
        package let timestamp: String?
        package let signature: String?
        /// The secrets (by index) its signature verified with.
        package let verified: [Int]
        package let body: String
        package let attempt: Int
        package let status: Int?
        package let userAgent: String?
        package let contentType: String?

        /// The body as a message's JSON object.
        package var message: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        }
        package var type: String? { message["type"] as? String }
        package var data: [String: Any] { message["data"] as? [String: Any] ?? [:] }
    }

    /// Every request received so far, in order.
    package var received: [Received] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("log.jsonl"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Received.self, from: Data($0.utf8)) }
    }

    /// How many connections it accepted so far, whether or not they sent anything.
    package var connections: Int {
        ((try? String(contentsOf: directory.appendingPathComponent("connections"), encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// Waits (up to `timeout` seconds) until `condition` holds of what was received; what was.
    @discardableResult
    package func wait(timeout: Double = 60, until condition: ([Received]) -> Bool) async throws -> [Received] {
        let end = Date().addingTimeInterval(timeout)
        while true {
            let now = received
            if condition(now) || Date() > end { return now }
            try await Task.sleep(for: .milliseconds(25))
        }
    }

    /// The resources (by id) whose changes arrived so far.
    package var resourceIDs: Set<String> { Set(received.compactMap { $0.data["id"] as? String }) }

    /// Waits (up to `timeout` seconds) until a message of each of `ids` arrived, then checks
    /// what did: each of them there, every message verified by the first secret, and a
    /// message sent more than once (at least once) always the same body under its id.
    package func expectEveryOne(of ids: Set<String>, timeout: Double = 60, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let received = try await wait(timeout: timeout) { _ in ids.isSubset(of: resourceIDs) }
        let arrived = resourceIDs
        #expect(ids.isSubset(of: arrived), "missing \(ids.subtracting(arrived).count) of \(ids.count)", sourceLocation: sourceLocation)
        #expect(received.allSatisfy { $0.verified == [0] }, sourceLocation: sourceLocation)
        #expect(Dictionary(grouping: received, by: { $0.id ?? "" }).values.allSatisfy { Set($0.map(\.body)).count == 1 }, sourceLocation: sourceLocation)
    }

    deinit {
        // Reaped on a thread of its own: a deinit may run on the tasks' shared threads.
        let (process, directory) = (process, directory)
        Thread {
            if process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: directory)
        }.start()
    }
}
