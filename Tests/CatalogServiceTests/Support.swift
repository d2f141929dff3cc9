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
let migrationsDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Migrations")

/// The engine the API tests run on: SQLite, or PostgreSQL when `CATALOG_TEST_ENGINE` is
/// `postgresql` (with `CATALOG_TEST_POSTGRES_URL` naming a role that may create databases).
enum TestEngine {
    static let postgresURL = ProcessInfo.processInfo.environment["CATALOG_TEST_POSTGRES_URL"]
    static let engine: DatabaseEngine = ProcessInfo.processInfo.environment["CATALOG_TEST_ENGINE"] == "postgresql" ? .postgresql : .sqlite
    /// Whether the tests run on SQLite (tests of what only SQLite offers are skipped otherwise).
    static var isSQLite: Bool { engine == .sqlite }

    /// A migrated, empty database that each test's database copies (`CREATE DATABASE … TEMPLATE`).
    private static let template: Result<String, any Error> = Result {
        guard let url = postgresURL else { throw StoreError.unavailable("CATALOG_TEST_ENGINE=postgresql needs CATALOG_TEST_POSTGRES_URL") }
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
    static func postgresDatabase(for directory: URL) throws -> String {
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
    static func release(_ directory: URL) {
        let name = databases.withLock { databases -> String? in
            guard var entry = databases[directory.path] else { return nil }
            entry.users -= 1
            databases[directory.path] = entry.users > 0 ? entry : nil
            return entry.users > 0 ? nil : entry.name
        }
        if let name, let url = postgresURL { try? PostgresAdmin.run("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", at: url) }
    }

    /// `url` naming the database `name`.
    static func database(_ name: String, in url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.path = "/" + name
        return components.string ?? url
    }
}

/// A running catalog on an ephemeral loopback port, over a fresh SQLite file in a
/// temporary directory (or a fresh PostgreSQL database: ``TestEngine``), with an admin
/// user whose API key ``client`` and ``api`` send.
final class TestCatalog: Sendable {
    let application: CatalogApplication
    let directory: URL
    /// Requests as the admin.
    let client: APIClient
    /// The admin's API key.
    let adminKey: String
    /// The admin's user id.
    let adminID: CatalogID
    init(seed: Bool = true, databaseDirectory: URL? = nil, configure: (inout CatalogConfiguration) -> Void = { _ in }) throws {
        directory = databaseDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("catalog-tests-\(UUID().uuidString)")
        var configuration = CatalogConfiguration()
        configuration.server.port = 0
        configuration.server.loopThreads = 1
        configuration.accessLog = false  // no access log in test output
        configuration.databasePath =
            TestEngine.engine == .postgresql
            ? try TestEngine.postgresDatabase(for: directory) : directory.appendingPathComponent("catalog.sqlite").path
        configuration.seedDemoCatalog = seed
        configuration.rateLimits = nil  // tests that measure budgets set their own
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
    static func adminKey(for server: URL) -> String? {
        adminKeys.withLock { $0[server.absoluteString] }
    }

    /// Requests without a credential.
    var anonymous: APIClient { APIClient(baseURL: client.baseURL) }

    /// Requests with `key`.
    func client(key: String) -> APIClient { APIClient(baseURL: client.baseURL, key: key) }

    /// The project's client library, pointed at this server, as the admin.
    var api: CatalogClient { CatalogClient(baseURL: client.baseURL, credentials: .apiKey(adminKey), timeout: 10) }

    /// A new user with `role` and an API key for it: the key, and the user's id.
    func user(_ name: String, role: Role = .member) throws -> (key: String, id: CatalogID) {
        let secret = try APIKeySecret()
        let created = try application.store.accounts.bootstrap(name: name, role: role, keyName: name, digest: secret.digest, prefix: secret.displayed)
        return (secret.text, created.user)
    }

    /// Stops the server and closes the database, keeping the file.
    func stop() throws { try application.shutdown() }

    deinit {
        try? application.shutdown()
        try? FileManager.default.removeItem(at: directory)
        if TestEngine.engine == .postgresql { TestEngine.release(directory) }
    }
}

/// A response as the tests see it.
struct APIResponse: Sendable {
    let status: Int
    let headers: [String: String]
    let body: Data

    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try CatalogJSON.makeDecoder().decode(T.self, from: body)
    }

    var problem: Problem? { try? decode(Problem.self) }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A thin URLSession wrapper: exact requests, no caching, no redirects followed.
struct APIClient: Sendable {
    let baseURL: URL
    /// The API key sent as `Authorization: Bearer …` unless a request names its own.
    let key: String?
    private let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()

    init(baseURL: URL, key: String? = nil) {
        self.baseURL = baseURL
        self.key = key
    }

    func send(_ method: String, _ path: String, headers: [String: String] = [:], body: Data? = nil) async throws -> APIResponse {
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

    func get(_ path: String, headers: [String: String] = [:]) async throws -> APIResponse {
        try await send("GET", path, headers: headers)
    }

    /// Sends `json` (any JSON-serializable value) with the given content type.
    func send(_ method: String, _ path: String, json: Any, contentType: String = "application/json", headers: [String: String] = [:]) async throws -> APIResponse {
        let body = try JSONSerialization.data(withJSONObject: json, options: [.fragmentsAllowed, .sortedKeys])
        return try await send(method, path, headers: headers.merging(["Content-Type": contentType]) { $1 }, body: body)
    }

    /// Follows `nextCursor` through every page of a list.
    func all<T: Codable & Sendable & Hashable>(_ path: String, as type: T.Type) async throws -> [T] {
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
func expectProblem(
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
final class ServerProcess: @unchecked Sendable {
    let process = ChildProcess()
    let log: URL
    /// Requests to it as `key`'s holder.
    private(set) var client: APIClient
    var port: Int { client.baseURL.port ?? 0 }

    /// Starts the server with `arguments` (after `--port 0`, unless `environment` sets
    /// `CATALOG_PORT`), logging to `log`, and waits until it is ready.
    init(_ arguments: [String], environment: [String: String]? = nil, log: URL, key: String? = nil) async throws {
        self.log = log
        try FileManager.default.createDirectory(at: log.deletingLastPathComponent(), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = ExecutableTests.executable
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
    func kill9() {
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
