import CatalogIdentity
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// `GET /v1/changes` (the catalog's) and `GET /v1/me/changes` (each viewer's own state):
/// every change since a token, in commit order, as JSON pages, as a long-poll (`wait=`) or
/// as server-sent events (`Accept: text/event-stream`).
struct ChangeFeed: Sendable {
    /// What a feed serves, and to whom.
    struct Kind: Sendable {
        let path: String
        let access: Access
        /// The query parameters it takes.
        let parameters: Set<String>
        /// The filter a request's parameters make, for its caller.
        let filter: @Sendable (QueryValues, Caller) throws -> ChangeFilter
        /// What the caller's tokens are bound to (hexadecimal): the catalog's id, or, for
        /// a viewer's own feed, a digest of it and the viewer's id (another viewer's token
        /// is then a 410).
        let scope: @Sendable (Caller) throws -> String
    }

    let kind: Kind
    let log: any ChangeSource
    let hub: ChangeHub
    /// How long tokens (and deletions) are kept.
    let retention: Duration
    /// The unsent bytes every event stream of the server shares (``StreamBudget``).
    let streamBudget: StreamBudget
    /// The rate budgets a full page is billed to; `nil` when rate limits are off.
    let limiter: RateLimiter?

    /// Reads of the feed run off the event loops, on two pools by the most changes a read
    /// may render: pages of up to ``fullPage`` changes (a client keeping up, a stream
    /// opening, a long-poll) here, larger ones on ``largePages``, so a small read never
    /// waits behind a thousand-change page. Callers take turns, and each holds at most
    /// four reads of a pool queued or running (a parked long-poll holds no place), so one
    /// caller's pages delay another's read by at most one page per thread.
    static let pool = WorkPool(name: "changes", threads: 2, queueLimit: 1024, perCaller: 4)
    /// Reads of pages of more than ``fullPage`` changes: one thread, so the event loops and
    /// the small reads always keep the rest of the machine.
    static let largePages = WorkPool(name: "changes-large", threads: 1, queueLimit: 256, perCaller: 4)
    /// How many stream opens one caller may have queued or running: the connections one
    /// address may hold by default (each open needs one).
    static let streamOpenShare = 128
    /// A page of at least this many changes (or one with more after it) is a full page,
    /// billed as an expensive read.
    static let fullPage = 100
    /// The work one read of the feed may do.
    static let allowance: Duration = .seconds(1)

    static let limitRange = 1...1000
    static let defaultLimit = 100
    static let waitRange = 1...60
    /// About the most JSON one page holds (at least one change).
    static let pageBytes = 1 << 20
    /// How many unsent bytes of an event stream cut its client off when more is sent.
    static let streamBuffer = 1 << 20
    static let parameters: Set<String> = ["since", "limit", "types", ChangeFeedSchema.itemFilter, "wait"]

    /// `GET /v1/changes`: the catalog's changes, as the caller may see them; tokens carry `catalog`.
    static func catalogKind(_ catalog: String) -> Kind {
        Kind(path: "/v1/changes", access: .read, parameters: parameters, filter: { values, _ in try catalogFilter(values) }, scope: { _ in catalog })
    }

    /// `GET /v1/me/changes`: the caller's own progress, favorites and ratings; its tokens are
    /// bound to the caller.
    static func viewerKind(_ catalog: String) -> Kind {
        Kind(
            path: "/v1/me/changes", access: .member, parameters: ["since", "limit", "wait"],
            filter: { _, caller in ChangeFilter(user: try caller.user()) },
            scope: { caller in Crypto.hex(Crypto.sha256(Array((catalog + ":" + (try caller.user()).rawValue).utf8))).prefix(32).description })
    }

    /// The comment streams get when nothing else happens for a while.
    static let heartbeat = Array(": heartbeat\n\n".utf8)
    /// The first bytes of a stream: the reconnection delay for `EventSource`.
    static let streamStart = Array("retry: 2000\n\n".utf8)

    /// A request to the feed, as parsed.
    struct Query {
        var token: ChangeToken?
        var filter = ChangeFilter()
        var limit = ChangeFeed.defaultLimit
        var wait: Int?
        var streaming = false
        /// The query's parameters, as given.
        var values = QueryValues()
    }

    func register(in routes: inout Routes) {
        // Every read of the log runs on the feed's own pool: the route itself reads nothing.
        routes.add(
            .GET, kind.path, kind.access, timeout: .seconds(Int64(Self.waitRange.upperBound) + 15),
            .waiting { request, caller, isAbandoned, done in
                try serve(request, caller, isAbandoned, done)
            })
    }

    /// The fields of every answer of the feed: chosen by `Accept` (and never stored: ``answer(_:_:)``).
    static let fields: [(name: String, value: String)] = [("Vary", "Accept")]

    /// A response of the feed: never stored.
    static func answer(_ headers: [(name: String, value: String)], _ body: [UInt8] = []) -> HTTPResponse {
        var response = HTTPResponse(status: .ok, headers: headers, body: body)
        response.cacheControl = "no-store"
        return response
    }

    private func serve(_ request: HTTPRequest, _ caller: Caller, _ isAbandoned: @escaping @Sendable () -> Bool, _ done: @escaping Completion) throws {
        var parsed = try Self.parse(request, parameters: kind.parameters)
        parsed.filter = try kind.filter(parsed.values, caller)
        let query = parsed
        let scope = try kind.scope(caller)
        let viewer = caller.viewer
        // A caller whose full pages spent its expensive budget waits for it; and it holds at
        // most its share of the feed's pool.
        let partition = RateLimiter.partition(caller, request)
        if let limiter {
            let check = limiter.check(.expensive, partition: partition)
            guard check.allowed else { throw ErrorWithHeaders(error: APIError.tooManyRequests(.expensive), headers: check.headers) }
        }
        // Opening a stream reads no page: its opens take turns in a line of their own, with a
        // share as large as the connections one address may hold (each open needs one).
        let opensStream = query.streaming && request.method == .GET
        let queued = Self.pool(for: query).submit(
            for: opensStream ? "stream " + partition : partition,
            share: opensStream ? Self.streamOpenShare : nil
        ) {
            // A client gone before its turn is owed nothing.
            guard !isAbandoned() else { return done(.failure(WorkPool.busy)) }
            ReadBudget.allow(Self.allowance)
            do {
                let after = try start(query.token, scope: scope, filter: query.filter)
                if query.streaming, !opensStream {
                    // The fields a stream opens with, and no stream: nothing would read it.
                    var response = Self.answer(Self.streamFields)
                    response.stream = ResponseStream(limit: 0)
                    done(.success(response))
                } else if query.streaming {
                    // A client gone meanwhile would hold a stream no connection takes.
                    guard !isAbandoned() else { return done(.failure(WorkPool.busy)) }
                    done(.success(try stream(after: after, query, viewer, scope: scope)))
                } else {
                    try poll(after: after, query, viewer, isAbandoned, partition: partition, scope: scope, done)
                }
            } catch {
                done(.failure(error))
            }
        }
        guard queued else { throw WorkPool.busy }
    }

    /// The pool a read of `query` runs on: by the most changes it may render.
    static func pool(for query: Query) -> WorkPool {
        !query.streaming && query.limit > fullPage ? largePages : pool
    }

    /// Where the feed continues for `token` (bound to `scope`): 0 without one.
    /// - Throws: 410 `syncTokenExpired` when it cannot continue from there.
    @discardableResult
    private func start(_ token: ChangeToken?, scope: String, filter: ChangeFilter) throws -> Int64 {
        guard let token else { return 0 }
        try log.check(token, catalog: scope, retention: retention, now: Self.wallClock(), filter: filter)
        return token.seq
    }

    /// Answers with the changes there are, or, with `wait`, parks the request until there
    /// are some or the time passes.
    private func poll(
        after: Int64, _ query: Query, _ viewer: Viewer, _ isAbandoned: @escaping @Sendable () -> Bool, partition: String, scope: String,
        _ done: @escaping Completion
    ) throws {
        let batch = try log.read(after: after, filter: query.filter, viewer: viewer, limit: query.limit, maxBytes: Self.pageBytes)
        let page = batch.page(for: viewer, limit: query.limit, maxBytes: Self.pageBytes)
        // Billed by what it cost: a full page is an expensive read.
        if page.hasMore || page.changes.count >= Self.fullPage { limiter?.charge(.expensive, partition: partition) }
        let answer: @Sendable ([ChangeRecord.Delivery], Int64, Bool) -> Void = { changes, next, hasMore in
            done(.success(self.response(changes, next: next, hasMore: hasMore, scope: scope)))
        }
        guard let wait = query.wait, page.changes.isEmpty, !page.hasMore else {
            return answer(page.changes, page.next, page.hasMore)
        }
        let waiter = ChangeHub.Waiter(
            after: page.next, filter: query.filter, viewer: viewer, limit: query.limit,
            deadline: MonotonicClock.milliseconds() + Int64(wait) * 1000, isAbandoned: isAbandoned, answer: answer)
        guard hub.park(waiter) else { throw WorkPool.busy }
    }

    /// A JSON page: `{"changes":[…],"hasMore":…,"nextToken":…}`.
    private func response(_ changes: [ChangeRecord.Delivery], next: Int64, hasMore: Bool, scope: String) -> HTTPResponse {
        var body: [UInt8] = []
        body.reserveCapacity(changes.reduce(96) { $0 + $1.json.count + 1 })
        body += Array(#"{"changes":["#.utf8)
        for (index, change) in changes.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body += change.json
        }
        body += Array(#"],"hasMore":"#.utf8) + Array((hasMore ? "true" : "false").utf8)
        body += Array(#","nextToken":""#.utf8) + Array(Self.token(next, scope: scope).utf8) + [UInt8(ascii: "\""), UInt8(ascii: "}")]
        return Self.answer([("Content-Type", "application/json")] + Self.fields, body)
    }

    /// Starts an event stream that the hub feeds from `after` on.
    private func stream(after: Int64, _ query: Query, _ viewer: Viewer, scope: String) throws -> HTTPResponse {
        let stream = ResponseStream(limit: Self.streamBuffer, budget: streamBudget)
        stream.send(Self.streamStart)
        let now = MonotonicClock.milliseconds()
        let subscriber = ChangeHub.Subscriber(
            after: after, filter: query.filter, viewer: viewer, stream: stream, lastSent: now, started: now,
            events: { changes in Self.events(changes, scope: scope) })
        guard hub.subscribe(subscriber) else { throw WorkPool.busy }
        var response = Self.answer(Self.streamFields)
        response.stream = stream
        return response
    }

    /// The fields an event stream opens with.
    private static let streamFields = [("Content-Type", "text/event-stream")] + fields + [("X-Accel-Buffering", "no")]

    /// Changes as events: `id: <token>`, `event: change`, `data: <the change>`, the
    /// tokens written straight into the bytes (one clock read for them all).
    private static func events(_ changes: [ChangeRecord.Delivery], scope: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(changes.reduce(0) { $0 + $1.json.count + 160 })
        let catalog = Array(scope.utf8), issued = Self.wallClock()
        for change in changes {
            bytes.append(contentsOf: "id: ".utf8)
            ChangeToken.append(catalog: catalog, seq: change.seq, issued: issued, to: &bytes)
            bytes.append(contentsOf: "\nevent: change\ndata: ".utf8)
            bytes += change.json
            bytes.append(contentsOf: "\n\n".utf8)
        }
        return bytes
    }

    private static func token(_ seq: Int64, scope: String) -> String {
        ChangeToken(catalog: scope, seq: seq, issued: Self.wallClock()).encoded
    }

    private static func wallClock() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Whether the `Accept` fields prefer an event stream to JSON (RFC 9110 §12.5.1): each
    /// of the two takes the quality of the most specific range that matches it (`*/*`,
    /// then `text/*` or `application/*`, then the type itself); the stream is chosen when
    /// it is acceptable and ranked above JSON, or as high while named exactly and JSON only
    /// by a wildcard. No `Accept` at all is JSON.
    static func prefersEvents(_ fields: [String]) -> Bool {
        var stream: (specificity: Int, quality: Double) = (0, 0)
        var json: (specificity: Int, quality: Double) = (0, 0)
        for range in fields.joined(separator: ",").split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let type = parts.first, !type.isEmpty else { continue }
            let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) }.map { min(max($0, 0), 1) } ?? 1
            func specificity(for target: String) -> Int {
                if type == target { return 3 }
                if type == "*/*" { return 1 }
                return type.hasSuffix("/*") && target.hasPrefix(type.dropLast()) ? 2 : 0
            }
            let forStream = specificity(for: "text/event-stream"), forJSON = specificity(for: "application/json")
            if forStream > stream.specificity || forStream == stream.specificity && forStream > 0 && quality > stream.quality { stream = (forStream, quality) }
            if forJSON > json.specificity || forJSON == json.specificity && forJSON > 0 && quality > json.quality { json = (forJSON, quality) }
        }
        guard stream.specificity > 0, stream.quality > 0 else { return false }
        return stream.quality > json.quality || stream.quality == json.quality && stream.specificity == 3 && json.specificity < 3
    }

    /// Reads the request: `since` (or, for a stream, `Last-Event-ID`), `limit`, `wait`,
    /// and whether it asks for a stream; its other `parameters` make its filter (``Kind/filter``).
    static func parse(_ request: HTTPRequest, parameters: Set<String> = parameters) throws(APIError) -> Query {
        let values = try QueryParameters.parse(request, accepted: parameters)
        var query = Query()
        query.streaming = prefersEvents(request.headers.values(for: "accept"))
        var tokenText = values["since"]
        if query.streaming, let lastEventID = request.headers["last-event-id"], !lastEventID.isEmpty {
            tokenText = lastEventID
        }
        if let tokenText {
            guard let token = ChangeToken(tokenText) else {
                throw APIError(status: .badRequest, code: "invalidSyncToken", detail: "The sync token is malformed; pass a nextToken (or event id) exactly as received.")
            }
            query.token = token
        }
        query.limit = try ListParameters.integer(values, "limit", in: limitRange) ?? defaultLimit
        query.values = values
        if values["wait"] != nil, query.streaming {
            throw .invalidParameter("wait", "applies to JSON pages; an event stream waits by itself.")
        }
        query.wait = try ListParameters.integer(values, "wait", in: waitRange, kind: "a number of seconds")
        return query
    }

    /// The catalog feed's filter: `types` and the item.
    static func catalogFilter(_ values: QueryValues) throws(APIError) -> ChangeFilter {
        var types: [String]?
        if let text = values["types"] {
            let names = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard !names.isEmpty, names.allSatisfy(ChangeFilter.allTypes.contains) else {
                throw .invalidParameter("types", "must be a comma-separated list of \(ChangeFilter.allTypes.joined(separator: ", ")).")
            }
            types = names
        }
        var item: CatalogID?
        if let text = values[ChangeFeedSchema.itemFilter] {
            guard let id = CatalogID(text) else { throw .invalidParameter(ChangeFeedSchema.itemFilter, "must be an id (a UUID).") }
            item = id
        }
        return ChangeFilter(types: types, playableItemID: item)
    }
}
