import CatalogIdentity
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `catalog-server` executable: it serves, and SIGTERM stops it with exit code 0.
/// (On SQLite files: the PostgreSQL pass runs the executable in ``ReplicaTests``.)
@Suite struct ExecutableTests {

    @Test func theBootstrapKeyIsAnAdminsOnAFreshFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("catalog.sqlite").path
        let key = try await Executables.bootstrapKey(database: database)
        let store = try CatalogStore(path: database, migrations: Migration.load(from: migrationsDirectory))
        defer { try? store.close() }
        let admins = try store.accounts.users.list(ListRequest(), as: User.self).items
        #expect(admins.map(\.displayName) == ["ops"])
        #expect(admins.map(\.role) == [.admin])
        let credential = try #require(try store.accounts.key(digest: APIKeySecret.digest(of: Array(key.utf8))))
        #expect(credential.role == .admin)
        #expect(credential.userID == admins.first?.id)
        #expect(try store.accounts.key(digest: APIKeySecret.digest(of: Array((key + "x").utf8))) == nil)
    }

    @Test func anAcknowledgedWriteSurvivesKill9() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-kill-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("catalog.sqlite").path
        let key = try await Executables.bootstrapKey(database: database)
        let server = try await ServerProcess(
            ["--database", database, "--migrations", migrationsDirectory.path, "--no-seed"],
            log: directory.appendingPathComponent("server.log"), key: key)
        let process = server.process
        let created = try? await server.client.send("POST", "/v1/games", json: ["name": "Durable", "imageName": "durable"])
        let response = try #require(created)
        #expect(response.status == 201)
        let game = try response.decode(Game.self)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        // A fresh open of the same file (recovering the WAL) finds the acknowledged write.
        let store = try CatalogStore(path: database, migrations: Migration.load(from: migrationsDirectory))
        defer { try? store.close() }
        #expect(try store.games.rendered(game.id)?.version == 1)
        withExtendedLifetime(server) {}  // its deinit would stop the process before the kill
    }

    @Test func settingsComeFromFlagsThenEnvironmentAndBadValuesStopStartup() async throws {
        func run(_ arguments: [String], environment: [String: String]) async throws -> (status: Int32, errors: String) {
            try await onThread { try blockingRun(arguments, environment: environment) }
        }
        @Sendable func blockingRun(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, errors: String) {
            let process = ChildProcess()
            process.executableURL = Executables.server
            process.arguments = arguments
            process.environment = environment
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try launch(process)
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, text)
        }
        let bad = try await run([], environment: ["CATALOG_PORT": "eighty"])
        #expect(bad.status == 64)
        #expect(bad.errors == "catalog-server: CATALOG_PORT must be an integer from 0 to 65535, not 'eighty'\n")
        let flagWins = try await run(["--port", "99999"], environment: ["CATALOG_PORT": "8080"])
        #expect(flagWins.errors == "catalog-server: --port must be an integer from 0 to 65535, not '99999'\n")
        let timeout = try await run([], environment: ["CATALOG_KEEP_ALIVE_TIMEOUT": "0"])
        #expect(timeout.errors.hasPrefix("catalog-server: CATALOG_KEEP_ALIVE_TIMEOUT must be a number of seconds"))

        // A valid environment configures the server.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-env-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // Port 0 from the environment: the server picks a free one and logs it.
        let server = try await ServerProcess(
            [],
            environment: [
                "CATALOG_PORT": "0", "CATALOG_DATABASE": directory.appendingPathComponent("c.sqlite").path,
                "CATALOG_MIGRATIONS": migrationsDirectory.path, "CATALOG_SEED": "false",
            ], log: directory.appendingPathComponent("server.log"))
        let process = server.process
        let games = try? await server.client.get("/v1/games").decode(Page<Game>.self)
        #expect(games?.items.isEmpty == true, "CATALOG_SEED=false")
        kill(process.processIdentifier, SIGTERM)
        try await onThread { process.waitUntilExit() }
        #expect(process.terminationStatus == 0)
        withExtendedLifetime(server) {}
    }

    @Test func everyFlagsHelpNamesItsOwnVariableWithADefault() async throws {
        let process = ChildProcess()
        process.executableURL = Executables.server
        process.arguments = ["--help"]
        let output = Pipe()
        process.standardOutput = output
        try launch(process)
        let help = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // Each option's block: `--flag <value>` or `--flag`, then its help, up to the next option.
        let blocks = help.components(separatedBy: "\n  --").dropFirst().map { "--" + $0.replacingOccurrences(of: "\n", with: " ") }
        var named = 0
        // Flags whose variable is not their name: a switch's opposite, a repeated flag's plural.
        let renamed = ["--no-seed": "CATALOG_SEED", "--jwt-issuer": "CATALOG_JWT_ISSUERS", "--jwt-audience": "CATALOG_JWT_AUDIENCES"]
        for block in blocks {
            let flag = String(block.prefix { $0 != " " })
            guard let open = block.range(of: "[CATALOG_") else { continue }
            let variable = String(block[block.index(after: open.lowerBound)...].prefix { $0.isUppercase || $0 == "_" })
            let expected = renamed[flag] ?? "CATALOG_" + flag.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
            #expect(variable == expected, "\(flag) says \(variable)")
            named += 1
        }
        #expect(named >= 34, "every setting's flag names its variable (found \(named))")
    }

    @Test func sigtermUnderWriteLoadLosesNoAcknowledgedWriteAndCheckpoints() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-drain-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("catalog.sqlite").path
        let key = try await Executables.bootstrapKey(database: database)
        // On a port it picks itself, and ready before the load starts.
        let server = try await ServerProcess(
            ["--database", database, "--migrations", migrationsDirectory.path, "--no-seed"], log: directory.appendingPathComponent("server.log"), key: key)
        let process = server.process
        let client = server.client

        // Eight clients write as fast as they can; SIGTERM arrives in the middle, once writes are flowing.
        let acknowledgedSoFar = Counter()
        let outcomes = try await withThrowingTaskGroup(of: ([CatalogID], [Int]).self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var acknowledged: [CatalogID] = [], unexpected: [Int] = []
                    for index in 0..<400 {
                        guard let response = try? await client.send("POST", "/v1/games", json: ["name": "G\(worker)-\(index)", "imageName": "g"]) else {
                            break  // refused or closed: the server has stopped taking requests
                        }
                        if response.status == 201, let game = try? response.decode(Game.self) {
                            acknowledged.append(game.id)
                            acknowledgedSoFar.increment()
                        } else {
                            unexpected.append(response.status)
                        }
                    }
                    return (acknowledged, unexpected)
                }
            }
            for _ in 0..<200 where acknowledgedSoFar.value < 50 { try await Task.sleep(for: .milliseconds(50)) }
            kill(process.processIdentifier, SIGTERM)
            return try await group.reduce(into: ([CatalogID](), [Int]())) {
                $0.0 += $1.0; $0.1 += $1.1
            }
        }
        try await onThread { process.waitUntilExit() }
        #expect(process.terminationStatus == 0)
        #expect(outcomes.1.isEmpty, "every answered write was a 201, not \(outcomes.1)")
        #expect(outcomes.0.count > 0)
        // The WAL was checkpointed into the database file on the way out.
        let walSize = (try? FileManager.default.attributesOfItem(atPath: database + "-wal")[.size] as? Int) ?? 0
        #expect(walSize == 0)
        let store = try CatalogStore(path: database, migrations: Migration.load(from: migrationsDirectory))
        defer { try? store.close() }
        for id in outcomes.0 {
            #expect(try store.games.rendered(id) != nil, "acknowledged write \(id) lost")
        }
    }

    @Test func theBinaryAloneInAnEmptyFolderMigratesAndServesItsContract() async throws {
        // Another test may take the free port between its choice and the bind: then what
        // answered was that test's server, this one exits saying so, and it runs again. So it
        // does when the copied binary could not be executed yet (ETXTBSY, see below).
        for _ in 0..<5 where try await !Self.aloneInAnEmptyFolder() {}
    }

    /// One run of the binary alone in an empty folder; false when another test held its port.
    private static func aloneInAnEmptyFolder() async throws -> Bool {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-alone-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let binary = folder.appendingPathComponent("catalog-server")
        // A hard link opens no file for writing. A copy does, and a process another test forks
        // meanwhile inherits that descriptor: executing the copy then fails with ETXTBSY.
        do { try FileManager.default.linkItem(at: Executables.server, to: binary) } catch {
            try FileManager.default.copyItem(at: Executables.server, to: binary)
        }
        let port = try Executables.freePort()
        let process = ChildProcess()
        // In the empty folder (`env -C`: see `runCommand`), which is its working directory.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["-C", folder.path, binary.path, "--port", String(port), "--database", "x.sqlite"]
        process.standardOutput = FileHandle.nullDevice
        let log = folder.appendingPathComponent("stderr.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: log)
        try launch(process)
        defer { if process.isRunning { process.terminate() } }
        let base = "http://127.0.0.1:\(port)"
        var served: Data?
        for _ in 0..<400 where served == nil {
            served = try? Data(contentsOf: try #require(URL(string: base + "/openapi.yaml")))
            if served == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let games = try? Data(contentsOf: try #require(URL(string: base + "/v1/games")))
        kill(process.processIdentifier, SIGTERM)
        try await onThread { process.waitUntilExit() }
        let printed = String(decoding: (try? Data(contentsOf: log)) ?? Data(), as: UTF8.self)
        if process.terminationStatus != 0, printed.contains("Address already in use") || printed.contains("Text file busy") {
            return false
        }
        #expect(served == (try Data(contentsOf: Fixtures.contract)), "the document the build carries, byte for byte")
        #expect(String(decoding: games ?? Data(), as: UTF8.self).contains("\"items\""), "migrated and seeded")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("x.sqlite").path))
        #expect(process.terminationStatus == 0, "\(printed.suffix(2_000))")
        return true
    }

    /// A SIGTERM sent the moment the port accepts (the server may still be setting up its
    /// handling of signals) still drains and stops it, with exit code 0.
    @Test func sigtermAsSoonAsThePortOpensIsNotLost() async throws {
        let binary = Executables.server
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "build catalog-server first (swift build)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-exec-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var attempts = 0
        var done = 0
        while done < 3 {
            attempts += 1
            try #require(attempts <= 10, "ten attempts, each on a port another test took first")
            let port = try Executables.freePort()
            let process = ChildProcess()
            process.executableURL = binary
            process.arguments = [
                "--port", String(port), "--log-level", "warning",
                "--database", directory.appendingPathComponent("db/catalog.sqlite").path, "--migrations", migrationsDirectory.path,
            ]
            process.standardOutput = FileHandle.nullDevice
            let log = directory.appendingPathComponent("stderr-\(port).log")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: log)
            try launch(process)
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            var accepted = false
            for _ in 0..<2_000 where !accepted {
                if let fd = try? Loopback.connect(port: port) {
                    close(fd)
                    accepted = true
                }
                if !accepted { usleep(5_000) }
            }
            try #require(accepted)
            kill(process.processIdentifier, SIGTERM)
            var exited = false
            for _ in 0..<200 where !exited {
                exited = !process.isRunning
                if !exited { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(exited, "stopped within 10 s")
            let printed = String(decoding: (try? Data(contentsOf: log)) ?? Data(), as: UTF8.self)
            // Another test may take a free port between its choice and the bind: what
            // accepted was that test's server, and this attempt proves nothing.
            if exited, process.terminationStatus != 0, printed.contains("Address already in use") { continue }
            done += 1
            if exited { #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(printed.suffix(2_000))") }
        }
    }

    @Test func sigtermStopsTheServerWithExitCodeZero() async throws {
        let binary = Executables.server
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "build catalog-server first (swift build)")
        let port = try Executables.freePort()
        let process = ChildProcess()
        process.executableURL = binary
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-exec-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        process.arguments = [
            "--port", String(port), "--shutdown-timeout", "5", "--log-format", "json",
            "--database", directory.appendingPathComponent("db/catalog.sqlite").path, "--migrations", migrationsDirectory.path,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice  // an orphan must not hold the test runner's pipes
        try launch(process)
        defer { if process.isRunning { process.terminate() } }

        let url = try #require(URL(string: "http://127.0.0.1:\(port)/healthz"))
        var body: String?
        for _ in 0..<400 where body == nil {
            if let data = try? Data(contentsOf: url) { body = String(decoding: data, as: UTF8.self) } else { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(body == "ok")

        kill(process.processIdentifier, SIGTERM)
        try await onThread { process.waitUntilExit() }
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let entries = printed.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String]
        }
        #expect(entries.count == printed.split(separator: "\n").count, "every line is a JSON object")
        let access = try #require(entries.first { $0["message"] == "request" && $0["path"] == "/healthz" })
        #expect(access["method"] == "GET")
        #expect(access["status"] == "200")
        #expect(access["bytes"] == "2")
        #expect(access["requestId"]?.count == 16)
        #expect(access["peer"]?.hasPrefix("127.0.0.1:") == true)
        #expect(Int(access["durationMicroseconds"] ?? "") != nil)
        #expect(entries.contains { $0["message"]?.hasPrefix("catalog-server listening") == true && $0["engine"]?.hasPrefix("SQLite 3.") == true })
        #expect(printed.contains("applied migration 0001_create_catalog.sql"))
        #expect(printed.contains("loaded the demo catalog"))
        #expect(printed.contains("listening on http://127.0.0.1:\(port)"))
        #expect(printed.contains("stopped"))
        // The pages start-up touched were let go of before the server listened, and every
        // request since (the health checks) ran with what it faulted in again.
        let released = try #require(entries.lazy.compactMap { $0["message"] }.first { $0.hasPrefix("released start-up pages: ") })
        let numbers = released.split { !$0.isNumber }.compactMap { Int($0) }
        try #require(numbers.count == 3, "\(released)")
        // Resident before, after, and the segments advised: more than a megabyte let go of.
        #expect(numbers[1] + 1_000 < numbers[0], "\(released)")
        #expect(numbers[2] > 1_000, "\(released)")
    }
}

/// A counter shared by concurrent test tasks.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
