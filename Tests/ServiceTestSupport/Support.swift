import CatalogClient
import CatalogIdentity
import CatalogModels
import CatalogService
import CatalogStore
import Foundation
import HTTPServer
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The repository's migrations folder.
package let migrationsDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Migrations")

/// The engines the API tests run on: a test takes the engine as its argument
/// (`@Test(arguments: TestEngine.all)`) and runs its body with it (``run(_:_:)``), so one
/// `swift test` runs each on SQLite and, when `CATALOG_TEST_POSTGRES_URL` names a role that
/// may create databases, on PostgreSQL.
package enum TestEngine {
    package static let postgresURL = ProcessInfo.processInfo.environment["CATALOG_TEST_POSTGRES_URL"]
    /// SQLite, and PostgreSQL when `CATALOG_TEST_POSTGRES_URL` is set.
    package static let all: [DatabaseEngine] = postgresURL == nil ? [.sqlite] : [.sqlite, .postgresql]
    /// The engine of the test running (``run(_:_:)``); SQLite outside one.
    @TaskLocal package static var engine: DatabaseEngine = .sqlite
    /// Whether the running test is on SQLite.
    package static var isSQLite: Bool { engine == .sqlite }

    /// Runs `body` with `engine` as the engine of the catalogs it makes (``TestCatalog``).
    package static func run<T>(_ engine: DatabaseEngine, _ body: () async throws -> T) async rethrows -> T {
        try await $engine.withValue(engine, operation: body)
    }

    /// Runs `body` with `engine` as the engine of the catalogs it makes (``TestCatalog``).
    package static func run<T>(_ engine: DatabaseEngine, _ body: () throws -> T) rethrows -> T {
        try $engine.withValue(engine, operation: body)
    }

    /// A migrated, empty database that each test's database copies (`CREATE DATABASE … TEMPLATE`).
    private static let template: Result<String, any Error> = Result {
        guard let url = postgresURL else { throw StoreError.unavailable("a test on PostgreSQL needs CATALOG_TEST_POSTGRES_URL") }
        let name = "catalog_template_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
        try PostgresAdmin.run("CREATE DATABASE \(name)", at: url)
        let store = try CatalogStore(.postgresql(database(name, in: url)), migrations: Migration.load(from: migrationsDirectory, for: .postgresql))
        try store.close()
        return name
    }

    /// The test databases by the directory of their test catalog, with how many open
    /// catalogs use each: a catalog reopened on the same directory reopens the same database.
    private static let databases = Mutex<[String: (url: String, name: String, users: Int)]>([:])

    /// The database of the test catalog in `directory`: a new one, copied from the
    /// migrated template, unless a catalog there has one. Returns its URL.
    package static func postgresDatabase(for directory: URL) throws -> String {
        if let url = databases.withLock({ databases -> String? in
            databases[directory.path]?.users += 1
            return databases[directory.path]?.url
        }) {
            return url
        }
        let template = try template.get()
        guard let url = postgresURL else { throw StoreError.unavailable("no CATALOG_TEST_POSTGRES_URL") }
        let name = "catalog_test_\(UInt64.random(in: 0...UInt64.max))"
        try PostgresAdmin.run("CREATE DATABASE \(name) TEMPLATE \(template)", at: url)
        let database = Self.database(name, in: url)
        databases.withLock { $0[directory.path] = (database, name, 1) }
        return database
    }

    /// Drops the database of the test catalog in `directory` once no catalog uses it.
    package static func release(_ directory: URL) {
        let name = databases.withLock { databases -> String? in
            guard var entry = databases[directory.path] else { return nil }
            entry.users -= 1
            databases[directory.path] = entry.users > 0 ? entry : nil
            return entry.users > 0 ? nil : entry.name
        }
        if let name, let url = postgresURL { try? PostgresAdmin.run("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", at: url) }
    }

    /// `url` naming the database `name`.
    package static func database(_ name: String, in url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.path = "/" + name
        return components.string ?? url
    }
}

/// A running catalog on an ephemeral loopback port, over a fresh SQLite file in a
/// temporary directory (or a fresh PostgreSQL database: ``TestEngine``), with an admin
/// user whose API key ``client`` and ``api`` send.
package final class TestCatalog: Sendable {
    package let application: CatalogApplication
    package let directory: URL
    /// Requests as the admin.
    package let client: APIClient
    /// The admin's API key.
    package let adminKey: String
    /// The admin's user id.
    package let adminID: CatalogID
    package init(seed: Bool = true, databaseDirectory: URL? = nil, configure: (inout CatalogConfiguration) -> Void = { _ in }) throws {
        directory = databaseDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tests-\(UUID().uuidString)")
        var configuration = CatalogConfiguration()
        configuration.server.port = 0
        configuration.server.loopThreads = 1
        configuration.accessLog = false  // no access log in test output
        configuration.databasePath =
            TestEngine.engine == .postgresql
            ? try TestEngine.postgresDatabase(for: directory) : directory.appendingPathComponent("catalog.sqlite").path
        configuration.seedDemoCatalog = seed
        configuration.seedDemoArtwork = false  // tests that look at the demo's pictures ask for them
        configuration.rateLimits = nil  // tests that measure budgets set their own
        configuration.mediaDirectory = directory.appendingPathComponent("media").path
        configuration.imageCacheDirectory = directory.appendingPathComponent("image-cache").path
        configuration.videoSpoolDirectory = directory.appendingPathComponent("video-spool").path
        // Videos are processed when a test asks (``CatalogApplication/processVideos()``);
        // tests of the background workers start some.
        configuration.videoWorkers = 0
        if TestEngine.engine == .postgresql {
            // Servers sharing a database seal webhook secrets with a key file they share.
            let key = directory.appendingPathComponent("webhook.key")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            if !FileManager.default.fileExists(atPath: key.path) {
                _ = FileManager.default.createFile(atPath: key.path, contents: Data(try Crypto.randomBytes(32)), attributes: [.posixPermissions: 0o600])
            }
            configuration.webhookKeyFile = key.path
        }
        configure(&configuration)
        application = try CatalogApplication(configuration: configuration)
        let port = try application.start()
        let secret = try APIKeySecret()
        adminID = try application.store.accounts.bootstrap(
            name: "Admin", role: .admin, keyName: "tests", digest: secret.digest,
            prefix: secret.displayed
        ).user
        adminKey = secret.text
        let origin = configuration.server.tls == nil ? "http://127.0.0.1" : "https://localhost"  // the test certificate's name
        client = APIClient(baseURL: URL(string: "\(origin):\(port)")!, key: adminKey)
        Self.adminKeys.withLock { $0[client.baseURL.absoluteString] = adminKey }
    }

    /// The admin keys of the running test catalogs, by base URL (for tests that run the CLI).
    private static let adminKeys = Mutex<[String: String]>([:])

    /// The admin key of the test catalog at `server`.
    package static func adminKey(for server: URL) -> String? {
        adminKeys.withLock { $0[server.absoluteString] }
    }

    /// Requests without a credential.
    package var anonymous: APIClient { APIClient(baseURL: client.baseURL) }

    /// Processes the video jobs waiting (``CatalogApplication/processVideos()``), on a
    /// thread of its own: ffmpeg is waited for there, never on the tasks' shared threads.
    @discardableResult
    package func processVideos() async throws -> Int {
        try await onThread { [application] in application.processVideos() }
    }

    /// Sweeps expired uploads and released videos now, on a thread of its own.
    package func sweepVideos() async throws {
        try await onThread { [application] in application.sweepVideos() }
    }

    /// The admin's client answered in process, without a socket (``APIClient/init(inProcess:key:)``).
    package var inProcess: APIClient { APIClient(inProcess: application.server, key: adminKey) }

    /// Requests with `key`.
    package func client(key: String) -> APIClient { APIClient(baseURL: client.baseURL, key: key) }

    /// The project's client library, pointed at this server, as the admin.
    package var api: CatalogClient { CatalogClient(baseURL: client.baseURL, credentials: .apiKey(adminKey), timeout: 10) }

    /// A new user with `role` and an API key for it: the key, and the user's id.
    package func user(_ name: String, role: Role = .member) throws -> (key: String, id: CatalogID) {
        let secret = try APIKeySecret()
        let created = try application.store.accounts.bootstrap(name: name, role: role, keyName: name, digest: secret.digest, prefix: secret.displayed)
        return (secret.text, created.user)
    }

    /// Stops the server and closes the database, keeping the file.
    package func stop() throws { try application.shutdown() }

    deinit {
        try? application.shutdown()
        try? FileManager.default.removeItem(at: directory)
        if TestEngine.engine == .postgresql { TestEngine.release(directory) }
    }
}

/// A response as the tests see it.
package struct APIResponse: Sendable {
    package let status: Int
    package let headers: [String: String]
    package let body: Data

    package func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    package func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try CatalogJSON.makeDecoder().decode(T.self, from: body)
    }

    package var problem: Problem? { try? decode(Problem.self) }
    package var text: String { String(decoding: body, as: UTF8.self) }
}

/// A thin URLSession wrapper: exact requests, no caching, no redirects followed. Or, made
/// with ``init(inProcess:key:)``, the same requests answered by the server in process,
/// without a socket (``HTTPServer/respond(to:)``).
package struct APIClient: Sendable {
    package let baseURL: URL
    /// The API key sent as `Authorization: Bearer …` unless a request names its own.
    package let key: String?
    private let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()

    /// The server that answers in process; `nil`: over the network.
    private let server: HTTPServer?

    package init(baseURL: URL, key: String? = nil) {
        self.baseURL = baseURL
        self.key = key
        server = nil
    }

    /// A client whose requests `server` answers in process, from a loopback client address.
    package init(inProcess server: HTTPServer, key: String? = nil) {
        baseURL = URL(fileURLWithPath: "/")
        self.key = key
        self.server = server
    }

    package func send(_ method: String, _ path: String, headers: [String: String] = [:], body: Data? = nil) async throws -> APIResponse {
        if let server {
            guard let verb = HTTPMethod(rawValue: method) else { throw URLError(.unsupportedURL) }
            var fields = headers.map { ($0.key, $0.value) }
            if let key, !headers.keys.contains(where: { $0.lowercased() == "authorization" }) { fields.append(("Authorization", "Bearer \(key)")) }
            if let body { fields.append(("Content-Length", String(body.count))) }
            let parts = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            var request = HTTPRequest(
                method: verb, path: String(parts[0]), query: parts.count > 1 ? String(parts[1]) : nil, headers: HTTPHeaders(fields),
                body: body.map(Array.init) ?? [], remoteAddress: "127.0.0.1:1")
            request.clientAddress = "127.0.0.1"
            let response = await server.respond(to: request)
            var answered: [String: String] = [:]
            for (name, value) in response.headers { answered[name] = answered[name].map { $0 + ", " + value } ?? value }
            if let cacheControl = response.cacheControl { answered["Cache-Control"] = cacheControl }
            return APIResponse(status: Int(response.status.code), headers: answered, body: Data(response.body))
        }
        guard let url = URL(string: baseURL.absoluteString + path) else { throw URLError(.badURL) }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields["\(name)"] = "\(value)" }
        return APIResponse(status: http.statusCode, headers: fields, body: data)
    }

    package func get(_ path: String, headers: [String: String] = [:]) async throws -> APIResponse {
        try await send("GET", path, headers: headers)
    }

    /// Sends `json` (any JSON-serializable value) with the given content type.
    package func send(_ method: String, _ path: String, json: Any, contentType: String = "application/json", headers: [String: String] = [:]) async throws -> APIResponse {
        let body = try JSONSerialization.data(withJSONObject: json, options: [.fragmentsAllowed, .sortedKeys])
        return try await send(method, path, headers: headers.merging(["Content-Type": contentType]) { $1 }, body: body)
    }

    /// Follows `nextCursor` through every page of a list.
    package func all<T: Codable & Sendable & Hashable>(_ path: String, as type: T.Type) async throws -> [T] {
        var items: [T] = []
        var next: String? = path
        while let current = next {
            let response = try await get(current)
            #expect(response.status == 200, "GET \(current): \(response.text)")
            let page = try response.decode(Page<T>.self)
            items += page.items
            let separator = path.contains("?") ? "&" : "?"
            next = page.nextCursor.map { path + separator + "cursor=" + $0 }
        }
        return items
    }
}

/// Runs `body`, expecting it to fail with a problem of `status` (and `code`, when given);
/// returns the problem.
@discardableResult
package func expectProblem(
    _ status: Int, _ code: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> some Any
) async -> Problem? {
    do {
        _ = try await body()
        Issue.record("expected a \(status) problem", sourceLocation: sourceLocation)
        return nil
    } catch {
        guard let error = error as? CatalogClientError else {
            Issue.record("expected a CatalogClientError, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
        #expect(error.problem?.status == status, "\(error)", sourceLocation: sourceLocation)
        if let code { #expect(error.problem?.code == code, "\(error)", sourceLocation: sourceLocation) }
        if status == 412, case .preconditionFailed = error {
        } else if status == 412 {
            Issue.record("a 412 must be .preconditionFailed", sourceLocation: sourceLocation)
        }
        return error.problem
    }
}

/// A `catalog-server` process on a port it picks itself (`--port 0`, read from its log),
/// so no other test can take the port between a choice and the bind.
package final class ServerProcess: @unchecked Sendable {
    package let process = ChildProcess()
    package let log: URL
    /// Requests to it as `key`'s holder.
    package private(set) var client: APIClient
    package var port: Int { client.baseURL.port ?? 0 }

    /// Starts the server with `arguments` (after `--port 0`, unless `environment` sets
    /// `CATALOG_PORT`), logging to `log`, and waits until it is ready.
    package init(_ arguments: [String], environment: [String: String]? = nil, log: URL, key: String? = nil) async throws {
        self.log = log
        try FileManager.default.createDirectory(at: log.deletingLastPathComponent(), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = Executables.server
        process.arguments = (environment?["CATALOG_PORT"] == nil ? ["--port", "0"] : []) + arguments
        if let environment { process.environment = environment }
        process.standardOutput = try FileHandle(forWritingTo: log)
        process.standardError = FileHandle.nullDevice
        try await onThread { [process] in try launch(process) }
        var port: String?
        for _ in 0..<400 where port == nil {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            port = text.range(of: #"listening on http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression)
                .map { String(text[$0].split(separator: ":").last ?? "") }
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let found = try #require(port, "the server logged its port")
        client = APIClient(baseURL: URL(string: "http://127.0.0.1:\(found)")!, key: key)
        var ready = false
        for _ in 0..<200 where !ready {
            ready = (try? await client.get("/readyz").status) == 200
            if !ready { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(ready, "the server is ready")
    }

    /// Kills it at once (SIGKILL) and waits for it to go.
    package func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// Sizes of the demo catalog the tests rely on.
package enum DemoCatalogCounts {
    package static let items = 12
    package static let games = 4
    package static let locations = 28
}

/// A raw event-stream client: the request, the head, then events as they come.
package final class EventStreamClient: @unchecked Sendable {
    /// The `id` of each change event's resource.
    package static func resourceIDs(_ events: [[String: String]]) -> [String] {
        events.compactMap { $0["data"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["id"] as? String }
    }

    package let fd: Int32
    private var buffer: [UInt8] = []
    private var body: [UInt8] = []
    private var chunked = true
    /// The response's status line and fields.
    package private(set) var head = ""
    /// Whether the server ended the stream cleanly (its last chunk).
    package private(set) var ended = false
    /// The `id` of the last whole event read.
    package private(set) var lastEventID: String?

    package init(port: Int, path: String = "/v1/changes", headers: [String: String] = [:], source: String = "127.0.0.1") throws {
        fd = try Loopback.connect(port: port, receiveTimeout: 10, source: source)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    deinit { close(fd) }

    /// Reads until `count` events, the end, or `timeout` seconds (the whole suite can load the
    /// machine for seconds at a time); each event's fields by name. It can return more than
    /// `count`: every whole event its last read brought.
    package func events(_ count: Int, timeout: Double = 30) throws -> [[String: String]] {
        var events: [[String: String]] = []
        let deadline = Date(timeIntervalSinceNow: timeout)
        while events.count < count {
            events += take()
            if events.count >= count || ended { break }
            guard Date() < deadline, read() != .end else { break }
        }
        return events
    }

    /// Reads what the socket holds; false at its end or on a timeout.
    package func readMore() -> Bool { read() == .bytes }

    /// What one read of the socket brought: bytes (added to the buffer), its end (or an
    /// error), or nothing before the receive timeout.
    private enum Read { case bytes, end, timedOut }

    private func read() -> Read {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(fd, &chunk, chunk.count, 0)
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .timedOut }
        guard count > 0 else { return .end }
        buffer += chunk[0..<count]
        return .bytes
    }

    /// The whole events decoded so far.
    package func take() -> [[String: String]] {
        if head.isEmpty {
            guard let end = find([13, 10, 13, 10], in: buffer) else { return [] }
            head = String(decoding: buffer[0..<end], as: UTF8.self)
            chunked = head.lowercased().contains("transfer-encoding: chunked")
            buffer.removeFirst(end + 4)
        }
        if chunked {
            while let lineEnd = find([13, 10], in: buffer), let size = Int(String(decoding: buffer[0..<lineEnd], as: UTF8.self), radix: 16),
                buffer.count >= lineEnd + 2 + size + 2
            {
                body += buffer[(lineEnd + 2)..<(lineEnd + 2 + size)]
                buffer.removeFirst(lineEnd + 2 + size + 2)
                if size == 0 { ended = true }
            }
        } else {
            body += buffer
            buffer = []
        }
        var events: [[String: String]] = []
        while let end = find([10, 10], in: body) {
            var fields: [String: String] = [:]
            for line in String(decoding: body[0..<end], as: UTF8.self).split(separator: "\n") where !line.hasPrefix(":") {
                let parts = line.split(separator: ":", maxSplits: 1)
                fields[String(parts[0])] = parts.count > 1 ? String(parts[1].dropFirst(parts[1].hasPrefix(" ") ? 1 : 0)) : ""
            }
            body.removeFirst(end + 2)
            if let id = fields["id"] { lastEventID = id }
            if fields["event"] == "change" { events.append(fields) }
        }
        return events
    }

    private func find(_ pattern: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        for index in 0...(bytes.count - pattern.count) where bytes[index] == pattern[0] && Array(bytes[index..<(index + pattern.count)]) == pattern {
            return index
        }
        return nil
    }
}

/// The executables built beside the test bundle, and what tests that run them need.
package enum Executables {
    /// The executable built beside the test bundle.
    package static var server: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("catalog-server")
    }

    package static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                bind(fd, pointer, length)
                return getsockname(fd, pointer, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs `catalog-server keys create` on `database` (a fresh file: it migrates it) and
    /// returns the admin key it prints, checking that standard output holds nothing else.
    package static func bootstrapKey(database: String) async throws -> String {
        try await onThread { try blockingBootstrapKey(database: database) }
    }

    private static func blockingBootstrapKey(database: String) throws -> String {
        let process = ChildProcess()
        process.executableURL = server
        process.arguments = ["keys", "create", "--role", "admin", "--name", "ops", "--database", database, "--migrations", migrationsDirectory.path]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try launch(process)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        _ = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let lines = printed.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2 && lines[1].isEmpty, "one line, the key, and nothing else: \(printed)")
        let key = String(lines[0])
        #expect(key.hasPrefix("catalog_") && key.count == 51)
        return key
    }
}

/// What several test targets make and read.
package enum Fixtures {
    /// `count` new playable items, created in order.
    package static func items(_ api: CatalogClient, _ count: Int) async throws -> [CatalogID] {
        var ids: [CatalogID] = []
        for index in 0..<count {
            let url = URL(string: "https://videos.example.com/\(index).m3u8")!
            ids.append(try await api.playableItems.create(PlayableItemInput(title: "Video \(index)", streamURL: url)).value.id)
        }
        return ids
    }

    /// The contract, `openapi.yaml`.
    package static let contract = migrationsDirectory.deletingLastPathComponent().appendingPathComponent("openapi.yaml")
}
