import CatalogModels
import CatalogStore
import Foundation
import HTTPServer

/// The service's routes, each registered with who may call it (``Access``). Every route
/// is listed in ``table``, which the role × route test walks.
///
/// What a request passes, in this order (``add(_:_:_:rate:timeout:usesDatabase:maxBody:bodyPassesServerLimit:caching:replaysAnswers:_:)``
/// composes it once per route):
/// 1. **Admission, from the head** (on the event loop, before a body byte is buffered):
///    the route's body limit (413), and a caller known without reading the database
///    (anonymous, a remembered credential) checked against the route's role (401/403).
/// 2. **Where it runs**: on the event loop; on ``DatabaseWork`` where reads wait on a
///    network (PostgreSQL); a body over ``LargeBodies/onLoop`` on ``LargeBodies``.
/// 3. **Authentication**: the admitted caller, or the credential looked up (on the pool
///    when that reads the database).
/// 4. **Rate budget** (``RateLimiter``): read, write or expensive; a refusal is answered
///    where the request is, never queued behind work.
/// 5. **Authorization**: the caller's role against the route's.
/// 6. **Idempotency** (`POST`): a replay of the kept answer, or a claim the answer settles.
/// 7. **The endpoint** (``Endpoint``): inline, a durable write, a wait, blocking work or a
///    read (expensive ones on ``ExpensiveReads``, or sent from the loop on PostgreSQL).
/// 8. **The answer** (``Delivery``): its caching (``Caching``), the rate fields, and for a
///    claimed key the answer kept in the write's own transaction (the request's writes
///    are told so, and where to answer, by ``Delivery/writeOptions``).
///
/// For a route that needs a caller, stages 3 to 8 are the values of its ``Pipeline``, made
/// here once, which also makes the head's admission check.
struct Routes {
    private(set) var router = Router()
    /// Every route with its access, in registration order.
    private(set) var table: [(method: HTTPMethod, pattern: String, access: Access)] = []
    let authenticator: Authenticator
    /// Whether reads need a credential too (`--require-auth-for-reads`).
    let readsNeedCredential: Bool
    /// The rate budgets; `nil` when rate limits are off.
    let limiter: RateLimiter?
    /// What makes `POST`s with an `Idempotency-Key` run once.
    let idempotency: Idempotency
    /// Where requests that touch the database run when reads must stay off the event
    /// loops (PostgreSQL); `nil` when they may run there (SQLite).
    let databaseWork: WorkPool?

    /// The `max-age` of shared answers (`--public-max-age`); `nil`: `no-cache`.
    let publicMaxAge: Int?
    /// What signs the media paths answers show (`--require-signed-playback`).
    let playbackSigner: PlaybackSigner?

    init(
        authenticator: Authenticator, readsNeedCredential: Bool, limiter: RateLimiter?, idempotency: Idempotency, databaseWork: WorkPool? = nil,
        publicMaxAge: Int? = nil, playbackSigner: PlaybackSigner? = nil
    ) {
        self.databaseWork = databaseWork
        self.publicMaxAge = publicMaxAge
        self.playbackSigner = playbackSigner
        self.authenticator = authenticator
        self.readsNeedCredential = readsNeedCredential
        self.limiter = limiter
        self.idempotency = idempotency
    }

    /// Registers a route. `rate` names the budget it spends from when that is not what
    /// its method says (reads for `GET`, writes otherwise; expensive for searches).
    /// `timeout` replaces the server's request deadline for work known to take long.
    /// A route that never touches the database (`usesDatabase: false`) always runs where
    /// its endpoint says. Its bodies are at most `maxBody` bytes (``BodyLimits``), and its
    /// caller's credential and role are checked from the head, before a body is read.
    /// With `bodyPassesServerLimit`, `maxBody` holds even where it is more than the server's
    /// `--max-body-size` (image uploads). A ``Endpoint/receiving(_:)`` endpoint takes its
    /// body as a stream (``Handler/streamingBody()``). `caching` says how its answers may be stored, when not as its method and access say
    /// (``Caching/default(_:_:)``). A `POST` replays its answer to a retry with the same
    /// `Idempotency-Key` unless `replaysAnswers` is false (an answer with a secret).
    mutating func add(
        _ method: HTTPMethod, _ pattern: String, _ access: Access, rate: RateClass? = nil, timeout: Duration? = nil,
        usesDatabase: Bool = true, maxBody: Int = BodyLimits.document, bodyPassesServerLimit: Bool = false, caching: Caching? = nil,
        replaysAnswers: Bool = true, options: [(name: String, value: String)] = [], _ endpoint: Endpoint
    ) {
        var streams = false
        if case .receiving = endpoint { streams = true }
        table.append((method, pattern, access))
        // A waiting endpoint starts where the request arrives: it must have no claim on an
        // `Idempotency-Key` to settle first (a database read).
        if case .waiting = endpoint { precondition(method == .GET, "a waiting endpoint is a GET: \(pattern)") }
        let keys = method == .POST ? (idempotency, replays: replaysAnswers) : nil
        var caching = caching ?? .default(method, access)
        // Where reads need a credential, no read is the same for everyone who may see it.
        if readsNeedCredential, access == .read, method == .GET { caching = .perCaller }
        let pool = usesDatabase ? databaseWork : nil
        var body: HandlerBody
        var pipeline: Pipeline?
        if access == .open {
            body = Self.openHandler(caching, maxAge: publicMaxAge, endpoint)
            if let pool { body = Self.offLoop(body, on: pool) }
        } else {
            let stages = Pipeline(
                identification: Identification(authenticator: authenticator), budget: Budget(limiter: limiter, fixed: rate),
                authorization: Authorization(minimum: minimum(access)), replay: keys.map { Replay(idempotency: $0.0, replays: $0.replays) },
                execution: Execution(endpoint: endpoint, pool: pool), answer: Answering(caching: caching, maxAge: publicMaxAge, signer: playbackSigner))
            body = { request, responder in try stages.handle(request, responder) }
            pipeline = stages
        }
        if pool == nil, maxBody > LargeBodies.onLoop, [.POST, .PUT, .PATCH].contains(method), !streams {
            // Reading a large body (parsing it, checking every member) is no event loop's work.
            body = Self.offLoop(body, on: LargeBodies.pool, when: { $0.body.count > LargeBodies.onLoop })
        }
        var handler = bodyPassesServerLimit ? Handler.either(body).allowingBody(upTo: maxBody) : Handler.either(body).limitingBody(to: maxBody)
        if streams { handler = handler.streamingBody() }
        if !options.isEmpty { handler = handler.describingOptions(options) }
        if let pipeline {
            let rate = rate ?? (method == .GET || method == .HEAD ? .read : .write)
            handler = handler.admitting { request in try pipeline.admit(request, rate: rate) }
        }
        router.add(method, pattern, timeout.map(handler.timeout) ?? handler)
    }

    /// The least role a route of `access` needs; `nil` when anyone may call it.
    private func minimum(_ access: Access) -> Role? {
        switch access {
        case .open: nil
        case .read: readsNeedCredential ? .member : nil
        case .member: .member
        case .editor: .editor
        case .admin: .admin
        }
    }

    /// `body`, run on `pool`, for the requests `when` selects (all by default); the others
    /// run where they are.
    private static func offLoop(
        _ body: @escaping HandlerBody, on pool: WorkPool,
        when selects: (@Sendable (HTTPRequest) -> Bool)? = nil
    ) -> HandlerBody {
        { request, responder in
            if let selects, !selects(request) { return try body(request, responder) }
            guard submit(request, on: pool, for: responder, { try body(request, responder) }) else { throw WorkPool.busy }
            return nil
        }
    }

    /// Queues `work` on `pool` for `responder`'s request, in the line of its client address
    /// (``WorkPool/submit(for:answering:_:)``).
    /// - Returns: false when the pool's queue, or the address's share of it, is full.
    static func submit(
        _ request: HTTPRequest, on pool: WorkPool, for responder: Responder,
        _ work: @escaping @Sendable () throws -> HTTPResponse?
    ) -> Bool {
        pool.submit(for: RateLimiter.partition(.anonymous, request), answering: responder, work)
    }

    /// The handler of a route anyone may call without a budget (health, readiness, the contract).
    private static func openHandler(_ caching: Caching, maxAge: Int?, _ endpoint: Endpoint) -> HandlerBody {
        let execution = Execution(endpoint: endpoint, pool: nil)
        return { request, responder in
            let delivery = Delivery(responder: responder, headers: [], finishing: caching.finishing(request, .anonymous, maxAge: maxAge))
            return try execution.run(request, .anonymous, delivery, expensive: execution.isExpensive(request, budgeted: false))
        }
    }

    typealias HandlerBody = @Sendable (HTTPRequest, Responder) throws -> HTTPResponse?
}
