import CatalogModels
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An async client for the catalog's HTTP API, built on `URLSession` and the shared
/// models, usable unchanged from iOS, macOS and Linux.
///
/// Reads of the public catalog need no credential; writes do: an API key, or identity
/// tokens from a provider (Sign in with Apple, say), asked for before each request.
///
/// ```swift
/// let client = CatalogClient(baseURL: URL(string: "http://127.0.0.1:8080")!, credentials: .apiKey(key))
/// for try await game in client.games.all(ListQuery(sort: "name")) { print(game.name) }
/// var item = try await client.playableItems.get(id)
/// item = try await client.playableItems.patch(id, MergePatch().set("title", "New"), ifMatch: item.etag)
/// ```
public struct CatalogClient: Sendable {
    /// Where the API lives, such as `http://127.0.0.1:8080`.
    public let baseURL: URL
    /// Headers sent with every request (for example an API key).
    public let headers: [String: String]
    /// How long one request may take, in seconds.
    public let timeout: TimeInterval
    /// What identifies the caller, if anything.
    public let credentials: Credentials?
    /// How many times a request is sent again after a 429, a 503 or a lost connection
    /// (waiting what `Retry-After` says, at most ``maxRetryDelay``). Only requests that
    /// are safe to repeat are: `GET`, `HEAD`, `PUT` and `DELETE`, any request after a 429
    /// (it was not processed), and `POST`, which always carries an `Idempotency-Key` that
    /// its retries reuse, so the server applies it once.
    public let retries: Int
    /// The longest wait before a retry, in seconds; a longer `Retry-After` is not waited for.
    public let maxRetryDelay: TimeInterval
    let session: URLSession

    /// What a client sends as `Authorization: Bearer …`.
    public enum Credentials: Sendable {
        /// An API key (`catalog_…`).
        case apiKey(String)
        /// An identity token, asked for before each request (so the provider can refresh it).
        case identityToken(@Sendable () async throws -> String)
    }

    /// Creates a client.
    public init(
        baseURL: URL, credentials: Credentials? = nil, headers: [String: String] = [:], timeout: TimeInterval = 30,
        retries: Int = 2, maxRetryDelay: TimeInterval = 10, session: URLSession? = nil
    ) {
        self.baseURL = baseURL
        self.retries = max(0, retries)
        self.maxRetryDelay = maxRetryDelay
        self.credentials = credentials
        self.headers = headers
        self.timeout = timeout
        self.session =
            session
            ?? {
                let configuration = URLSessionConfiguration.ephemeral
                configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
                configuration.urlCache = nil
                return URLSession(configuration: configuration)
            }()
    }

    /// `/v1/playable-items`.
    public var playableItems: ResourceClient<PlayableItem, PlayableItemInput> { ResourceClient(client: self, path: "/v1/playable-items") }
    /// `/v1/games`.
    public var games: ResourceClient<Game, GameInput> { ResourceClient(client: self, path: "/v1/games") }
    /// `/v1/locations`.
    public var locations: ResourceClient<Location, LocationInput> { ResourceClient(client: self, path: "/v1/locations") }
    /// `/v1/playlists` (their own fields; entries through ``entries(of:)``).
    public var playlists: ResourceClient<Playlist, PlaylistInput> { ResourceClient(client: self, path: "/v1/playlists") }
    /// `/v1/playlists/{id}/entries`.
    public func entries(of playlistID: CatalogID) -> PlaylistEntriesClient { PlaylistEntriesClient(client: self, playlistID: playlistID) }
    /// Comments and replies.
    public var comments: CommentsClient { CommentsClient(client: self) }
    /// `/v1/users` (admins; anyone reads a public profile).
    public var users: ResourceClient<User, UserInput> { ResourceClient(client: self, path: "/v1/users") }
    /// `/v1/api-keys`: the caller's keys (every key, for admins).
    public var apiKeys: APIKeysClient { APIKeysClient(client: self) }
    /// `/v1/webhooks` (admins): endpoints that receive signed messages of changes.
    public var webhooks: WebhooksClient { WebhooksClient(client: self) }
    /// `/v1/changes`: the change feed (``CatalogSync`` keeps a local copy with it).
    public var changes: ChangesClient { ChangesClient(client: self) }

    /// The caller's own profile (`GET /v1/me`).
    public func me() async throws(CatalogClientError) -> Tagged<User> {
        try tagged(await send("GET", "/v1/me"))
    }

    /// Changes the caller's profile (`PATCH /v1/me`, a merge patch of `displayName`, `avatarURL`, `email`).
    public func updateMe(_ changes: MergePatch, ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<User> {
        try tagged(await send("PATCH", "/v1/me", body: encode(changes), contentType: "application/merge-patch+json", headers: condition(ifMatch)))
    }

    /// Deletes the caller's account (`DELETE /v1/me`): its keys stop working, its private
    /// playlists go, its comments stay with the author shown as deleted.
    public func deleteMe() async throws(CatalogClientError) {
        _ = try await send("DELETE", "/v1/me")
    }

    /// Whether the server answers `/healthz`.
    public func isHealthy() async -> Bool {
        (try? await send("GET", "/healthz").response.statusCode) == 200
    }

    /// Whether the server is ready for traffic (`/readyz`: the database answers with every
    /// migration applied, and the server is not draining).
    public func isReady() async -> Bool {
        (try? await send("GET", "/readyz").response.statusCode) == 200
    }

    /// The OpenAPI document the server serves (`/openapi.yaml`).
    public func openAPIDocument() async throws(CatalogClientError) -> String {
        String(decoding: try await send("GET", "/openapi.yaml").data, as: UTF8.self)
    }

    /// The Prometheus metrics exposition (`/metrics`).
    public func metrics() async throws(CatalogClientError) -> String {
        String(decoding: try await send("GET", "/metrics").data, as: UTF8.self)
    }

    /// Has the server write a consistent copy of its database into its backup folder
    /// (`POST /admin/backups`).
    public func createBackup() async throws(CatalogClientError) -> Backup {
        try decode(Backup.self, from: await send("POST", "/admin/backups").data)
    }

    // MARK: Transport

    /// Sends one request (again, as ``retries`` allows) and returns the body and
    /// response; non-2xx/304 statuses become ``CatalogClientError``. `timeout` replaces
    /// ``timeout`` for this request (a long-poll waits longer).
    func send(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil, contentType: String? = nil,
        headers extra: [String: String] = [:], timeout: TimeInterval? = nil
    )
        async throws(CatalogClientError) -> (data: Data, response: HTTPURLResponse)
    {
        guard var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false) else {
            throw .invalidResponse("Cannot build a URL from \(baseURL) and \(path).")
        }
        if !query.isEmpty { components.queryItems = query }
        guard let url = components.url else { throw .invalidResponse("Cannot build a URL for \(path).") }
        var extra = extra
        // One key for every attempt: the server applies the POST once and replays its answer.
        if method == "POST", !extra.keys.contains(where: { $0.lowercased() == "idempotency-key" }) {
            extra["Idempotency-Key"] = UUID().uuidString.lowercased()
        }
        let repeatable = ["GET", "HEAD", "PUT", "DELETE", "POST"].contains(method)
        var attempt = 0
        while true {
            do {
                return try await sendOnce(method, url, body: body, contentType: contentType, headers: extra, timeout: timeout ?? self.timeout)
            } catch {
                attempt += 1
                guard attempt <= retries, let delay = retryDelay(after: error, repeatable: repeatable, attempt: attempt) else { throw error }
                try? await Task.sleep(for: .seconds(delay))
            }
        }
    }

    /// How long to wait before sending again after `error`, or `nil` when it must not be sent again.
    private func retryDelay(after error: CatalogClientError, repeatable: Bool, attempt: Int) -> TimeInterval? {
        switch error {
        case let .rateLimited(_, retryAfter):
            return retryAfter.map(TimeInterval.init).flatMap { $0 <= maxRetryDelay ? $0 : nil }
        case let .problem(problem) where problem.status == 503 && repeatable && problem.code != "tooExpensive":
            // (A query too expensive to answer stays so: it is not sent again.)
            return min(maxRetryDelay, TimeInterval(attempt))
        case let .problem(problem) where problem.status == 409 && problem.code == "idempotencyKeyInUse":
            // The first attempt is still running; its answer will be replayed.
            return min(maxRetryDelay, TimeInterval(attempt))
        case .transport where repeatable:
            return min(maxRetryDelay, 0.5 * TimeInterval(attempt))
        default:
            return nil
        }
    }

    private func sendOnce(
        _ method: String, _ url: URL, body: Data?, contentType: String?, headers extra: [String: String],
        timeout: TimeInterval
    ) async throws(CatalogClientError) -> (data: Data, response: HTTPURLResponse) {
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = method
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        for (name, value) in headers.merging(extra, uniquingKeysWith: { $1 }) { request.setValue(value, forHTTPHeaderField: name) }
        switch credentials {
        case let .apiKey(key)?:
            request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        case let .identityToken(provide)?:
            do {
                request.setValue("Bearer \(try await provide())", forHTTPHeaderField: "Authorization")
            } catch {
                throw .transport("No identity token: \(error.localizedDescription)")
            }
        case nil:
            break
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw .transport(error.localizedDescription)
        }
        guard let http = response as? HTTPURLResponse else { throw .invalidResponse("Not an HTTP response.") }
        guard (200..<300).contains(http.statusCode) || http.statusCode == 304 else {
            let problem =
                (try? CatalogJSON.makeDecoder().decode(Problem.self, from: data))
                ?? Problem(
                    title: HTTPURLResponse.localizedString(forStatusCode: http.statusCode), status: http.statusCode,
                    detail: String(decoding: data.prefix(500), as: UTF8.self))
            switch http.statusCode {
            case 401: throw .unauthorized(problem)
            case 403: throw .forbidden(problem)
            case 412: throw .preconditionFailed(problem)
            case 429: throw .rateLimited(problem, retryAfter: http.value(forHTTPHeaderField: "Retry-After").flatMap { Int($0) })
            default: throw .problem(problem)
            }
        }
        return (data, http)
    }

    func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(CatalogClientError) -> T {
        do {
            return try CatalogJSON.makeDecoder().decode(T.self, from: data)
        } catch {
            throw .invalidResponse("Cannot decode \(T.self): \(error)")
        }
    }
}

/// Why a client call failed.
public enum CatalogClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server answered with a problem document (any non-2xx status but 401, 403 and 412).
    case problem(Problem)
    /// No credential, or one the server refuses (401): sign in again or use another key.
    case unauthorized(Problem)
    /// The credential is valid but lacks the rights (403).
    case forbidden(Problem)
    /// `If-Match` named a version that is no longer current (412): fetch again, then retry.
    case preconditionFailed(Problem)
    /// The caller spent its budget of this kind of request (429); `retryAfter` is the
    /// seconds until it holds a request again. The client retries by itself when that
    /// is short (see ``CatalogClient/retries``).
    case rateLimited(Problem, retryAfter: Int?)
    /// The request never got an HTTP answer.
    case transport(String)
    /// The answer was not what the API promises.
    case invalidResponse(String)

    /// The problem document, for every case but `transport` and `invalidResponse`.
    public var problem: Problem? {
        switch self {
        case let .problem(problem), let .preconditionFailed(problem), let .unauthorized(problem), let .forbidden(problem),
            let .rateLimited(problem, _):
            problem
        default: nil
        }
    }

    /// Whether the server refused a change-feed token as too old or from another database
    /// (410 `syncTokenExpired`): drop what was synced and start again without `since`.
    public var isSyncTokenExpired: Bool {
        guard case let .problem(problem) = self else { return false }
        return problem.status == 410 && problem.code == "syncTokenExpired"
    }

    /// Whether the same request may succeed later by itself: it got no HTTP answer, or a
    /// 429, 502, 503 (but for a query too expensive to answer) or 504. The client has
    /// already retried it as ``CatalogClient/retries`` allows.
    public var isTransient: Bool {
        switch self {
        case .transport, .rateLimited: true
        case let .problem(problem): [502, 503, 504].contains(problem.status) && problem.code != "tooExpensive"
        default: false
        }
    }

    /// A one-line explanation.
    public var description: String {
        switch self {
        case let .problem(problem), let .preconditionFailed(problem), let .unauthorized(problem), let .forbidden(problem),
            let .rateLimited(problem, _):
            "\(problem.status) \(problem.title)" + (problem.detail.map { ": \($0)" } ?? "")
        case let .transport(message): "transport: \(message)"
        case let .invalidResponse(message): "invalid response: \(message)"
        }
    }
}
