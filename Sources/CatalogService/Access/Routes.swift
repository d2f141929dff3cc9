import CatalogModels
import CatalogStore
import Foundation
import HTTPServer

/// The service's routes, each registered with who may call it (``Access``). Every route
/// is listed in ``table``, which the role × route test walks.
///
/// What a request passes, in this order (``add(_:_:_:rate:timeout:usesDatabase:maxBody:caching:replaysAnswers:_:)``
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
///    read (expensive ones on ``ExpensiveReads``).
/// 8. **The answer** (``Delivery``): its caching (``Caching``), the rate fields, and for a
///    claimed key the answer kept in the write's own transaction (the request's writes
///    are told so, and where to answer, by ``Delivery/writeOptions``).
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

    init(
        authenticator: Authenticator, readsNeedCredential: Bool, limiter: RateLimiter?, idempotency: Idempotency, databaseWork: WorkPool? = nil,
        publicMaxAge: Int? = nil
    ) {
        self.databaseWork = databaseWork
        self.publicMaxAge = publicMaxAge
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
    /// `caching` says how its answers may be stored, when not as its method and access say
    /// (``Caching/default(_:_:)``). A `POST` replays its answer to a retry with the same
    /// `Idempotency-Key` unless `replaysAnswers` is false (an answer with a secret).
    mutating func add(
        _ method: HTTPMethod, _ pattern: String, _ access: Access, rate: RateClass? = nil, timeout: Duration? = nil,
        usesDatabase: Bool = true, maxBody: Int = BodyLimits.document, caching: Caching? = nil, replaysAnswers: Bool = true,
        _ endpoint: Endpoint
    ) {
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
        if access == .open {
            body = Self.openHandler(caching, maxAge: publicMaxAge, endpoint)
            if let pool { body = Self.offLoop(body, on: pool) }
        } else {
            body = handler(access, rate, keys, caching, pool: pool, endpoint)
        }
        if pool == nil, maxBody > LargeBodies.onLoop, [.POST, .PUT, .PATCH].contains(method) {
            // Reading a large body (parsing it, checking every member) is no event loop's work.
            body = Self.offLoop(body, on: LargeBodies.pool, when: { $0.body.count > LargeBodies.onLoop })
        }
        var handler = Handler.either(body).limitingBody(to: maxBody)
        if access != .open {
            handler = handler.admitting(admission(minimum(access), rate ?? (method == .GET || method == .HEAD ? .read : .write)))
        }
        router.add(method, pattern, timeout.map(handler.timeout) ?? handler)
    }

    /// The check a request with a body passes before its body is read: a credential known
    /// bad is a 401, a caller known to lack the role a 401 or 403, spending from the same
    /// budget as when the handler refuses it. A caller not known without reading the
    /// database passes; its handler checks it with the body.
    private func admission(_ minimum: Role?, _ rate: RateClass) -> @Sendable (HTTPRequest) throws -> (any AnyObject & Sendable)? {
        { [authenticator, limiter] request in
            let caller: Caller?
            do {
                caller = try authenticator.knownCaller(request)
            } catch {
                throw ErrorWithHeaders(error: error, headers: try Self.spend(limiter, rate, .anonymous, request))
            }
            guard let caller else { return nil }
            do {
                try Self.authorize(caller, minimum)
            } catch {
                throw ErrorWithHeaders(error: error, headers: try Self.spend(limiter, rate, caller, request))
            }
            return Admitted(caller: caller)  // the handler's caller: not looked up again
        }
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
    private static func submit(
        _ request: HTTPRequest, on pool: WorkPool, for responder: Responder,
        _ work: @escaping @Sendable () throws -> HTTPResponse?
    ) -> Bool {
        pool.submit(for: RateLimiter.partition(.anonymous, request), answering: responder, work)
    }

    /// The handler of a route anyone may call without a budget (health, readiness, the contract).
    private static func openHandler(_ caching: Caching, maxAge: Int?, _ endpoint: Endpoint) -> HandlerBody {
        { request, responder in
            let delivery = Delivery(responder: responder, headers: [], finishing: caching.finishing(request, .anonymous, maxAge: maxAge))
            return try run(endpoint, request, .anonymous, delivery, expensive: isExpensive(request, endpoint))
        }
    }

    typealias HandlerBody = @Sendable (HTTPRequest, Responder) throws -> HTTPResponse?

    /// The handler of a route that needs a caller: it authenticates the caller, spends from
    /// its rate budget and serves the request. With a `pool` (a shared database), a caller
    /// known without reading the database (anonymous, a remembered credential, admitted
    /// from the head) spends its budget where the request arrived, so a refusal never waits
    /// for the pool, and only the rest runs there; finding out who an unknown credential
    /// belongs to runs there too.
    private func handler(
        _ access: Access, _ fixedRate: RateClass?, _ idempotency: (Idempotency, replays: Bool)?, _ caching: Caching,
        pool: WorkPool?, _ endpoint: Endpoint
    ) -> HandlerBody {
        let serving = Serving(
            endpoint: endpoint, minimum: minimum(access), idempotency: idempotency, caching: caching, maxAge: publicMaxAge,
            limiter: limiter, authenticator: authenticator)
        // A waiting endpoint queues its own reads: it needs the pool for authentication only.
        let endpointPool: WorkPool? = if case .waiting = endpoint { nil } else { pool }
        return { request, responder in
            // Decided once: what it costs sets both the budget it spends and where it runs.
            let expensive = Self.isExpensive(request, endpoint)
            let rate = fixedRate ?? (expensive ? .expensive : request.method == .GET || request.method == .HEAD ? .read : .write)
            // A caller the head's admission check found is not looked up again.
            if let admitted = request.admitted as? Admitted {
                return try serving.proceed(request, responder, admitted.caller, rate, expensive, on: endpointPool)
            }
            guard let pool else { return try serving.authenticating(request, responder, rate, expensive) }
            let known: Caller?
            do {
                known = try serving.authenticator.knownCaller(request)
            } catch {
                throw ErrorWithHeaders(error: error, headers: try Self.spend(serving.limiter, rate, .anonymous, request))
            }
            if let known { return try serving.proceed(request, responder, known, rate, expensive, on: endpointPool) }
            guard Self.submit(request, on: pool, for: responder, { try serving.authenticating(request, responder, rate, expensive) }) else {
                throw WorkPool.busy
            }
            return nil
        }
    }

    /// How a route serves a request that needs a caller, made once per route: finding out
    /// the caller, spending its budget (`rate`) and running the endpoint (an `expensive`
    /// read on the expensive reads' pool).
    private final class Serving: Sendable {
        let endpoint: Endpoint
        let minimum: Role?
        let idempotency: (Idempotency, replays: Bool)?
        let caching: Caching
        let maxAge: Int?
        let limiter: RateLimiter?
        let authenticator: Authenticator

        init(
            endpoint: Endpoint, minimum: Role?, idempotency: (Idempotency, replays: Bool)?, caching: Caching, maxAge: Int?,
            limiter: RateLimiter?, authenticator: Authenticator
        ) {
            self.endpoint = endpoint
            self.minimum = minimum
            self.idempotency = idempotency
            self.caching = caching
            self.maxAge = maxAge
            self.limiter = limiter
            self.authenticator = authenticator
        }

        /// Finds out who the caller is (reading the database if need be) and proceeds.
        func authenticating(_ request: HTTPRequest, _ responder: Responder, _ rate: RateClass, _ expensive: Bool) throws -> HTTPResponse? {
            let outcome: Authenticator.Outcome
            do {
                outcome = try authenticator.authenticate(request)
            } catch {
                // A credential that fails spends from its address's budget.
                throw ErrorWithHeaders(error: error, headers: try Routes.spend(limiter, rate, .anonymous, request))
            }
            switch outcome {
            case let .now(caller):
                return try proceed(request, responder, caller, rate, expensive, on: nil)
            case let .later(wait):
                wait { result in
                    // The caller's user was just created; go on off the writer's thread.
                    let queued = Handler.runBlocking {
                        do {
                            if let response = try self.proceed(request, responder, try result.get(), rate, expensive, on: nil) {
                                responder.respond(response)
                            }
                        } catch {
                            responder.fail(error)
                        }
                    }
                    if !queued { responder.fail(WorkPool.busy) }
                }
                return nil
            }
        }

        /// Spends `caller`'s budget and serves the request; on `pool`, when given.
        func proceed(
            _ request: HTTPRequest, _ responder: Responder, _ caller: Caller, _ rate: RateClass, _ expensive: Bool,
            on pool: WorkPool?
        ) throws -> HTTPResponse? {
            let delivery = Delivery(
                responder: responder, headers: try Routes.spend(limiter, rate, caller, request),
                finishing: caching.finishing(request, caller, maxAge: maxAge))
            guard let pool else { return try Routes.serve(endpoint, request, caller, minimum, delivery, idempotency, expensive: expensive) }
            try delivery.guarding {
                let queued = Routes.submit(request, on: pool, for: responder) {
                    try Routes.serve(self.endpoint, request, caller, self.minimum, delivery, self.idempotency, expensive: expensive)
                }
                guard queued else { throw WorkPool.busy }
            }
            return nil
        }
    }

    /// Authorizes `caller`, settles its `Idempotency-Key` (a replay, or a claim on the
    /// key that the answer settles) and runs `endpoint`: the response when it has one
    /// now, `nil` when it answers through `delivery`. Errors carry the delivery's fields.
    private static func serve(
        _ endpoint: Endpoint, _ request: HTTPRequest, _ caller: Caller, _ minimum: Role?, _ delivery: consuming Delivery,
        _ idempotency: (Idempotency, replays: Bool)?, expensive: Bool
    ) throws -> HTTPResponse? {
        try delivery.guarding { try Self.authorize(caller, minimum) }
        if let (idempotency, replays) = idempotency {
            switch try delivery.guarding({ try idempotency.start(request, caller) }) {
            case nil: break
            case let .replay(response)?: return try delivery.finish(response).adding(delivery.headers)
            case let .claimed(claim)?:
                delivery.claim = Delivery.Claim(idempotency: idempotency, claim: claim, keeping: replays ? TransactionAnswer() : nil)
            }
        }
        guard let response = try run(endpoint, request, caller, delivery, expensive: expensive) else { return nil }
        guard delivery.claim != nil else { return response }
        // The answer is kept before it goes out.
        delivery.deliver(response)
        return nil
    }

    /// Whether `request` is an expensive read of a `.read` endpoint.
    private static func isExpensive(_ request: HTTPRequest, _ endpoint: Endpoint) -> Bool {
        if case let .read(isExpensive, _) = endpoint { return isExpensive(request) }
        return false
    }

    /// Spends one token of `rate` from the caller's budget (its user's, whatever key or
    /// token it came with; its address's when anonymous).
    /// - Returns: the rate limit fields for the response.
    /// - Throws: 429 with those fields and `Retry-After` when the budget is spent.
    private static func spend(_ limiter: RateLimiter?, _ rate: RateClass, _ caller: Caller, _ request: HTTPRequest) throws -> [(name: String, value: String)] {
        guard let limiter else { return [] }
        let decision = limiter.take(rate, partition: RateLimiter.partition(caller, request))
        guard decision.allowed else { throw ErrorWithHeaders(error: APIError.tooManyRequests(rate), headers: decision.headers) }
        return decision.headers
    }

    /// 401 when the caller is anonymous and the route needs a role, 403 when its role is too low.
    private static func authorize(_ caller: Caller, _ minimum: Role?) throws(APIError) {
        guard let minimum else { return }
        guard caller.role != nil else { throw APIError.unauthenticated }
        guard caller.has(minimum) else { throw APIError.forbidden("This needs the \(minimum.rawValue) role or a higher one.") }
    }

    /// Runs `endpoint`: its response when it has one now, `nil` when it answers through
    /// `delivery`. An `expensive` read runs on the expensive reads' pool.
    static func run(_ endpoint: Endpoint, _ request: HTTPRequest, _ caller: Caller, _ delivery: Delivery, expensive: Bool) throws -> HTTPResponse? {
        switch endpoint {
        case let .inline(body):
            return try delivery.answering { try body(request, caller) }
        case let .later(body):
            try delivery.guarding { try body(request, caller, delivery.writeOptions) { delivery.complete($0) } }
            return nil
        case let .waiting(body):
            let responder = delivery.responder
            try delivery.guarding { try body(request, caller, { responder.isAbandoned }) { delivery.complete($0) } }
            return nil
        case let .blocking(body):
            let responder = delivery.responder
            delivery.run(on: WorkPool.blocking) { try body(request, caller, { responder.isAbandoned }) }
            return nil
        case let .read(_, body):
            guard expensive else { return try delivery.answering { try body(request, caller) } }
            delivery.run(on: ExpensiveReads.pool) {
                ReadBudget.allow(ExpensiveReads.allowance)
                return try body(request, caller)
            }
            return nil
        }
    }
}
