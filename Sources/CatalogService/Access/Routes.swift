import Foundation
import CatalogModels
import CatalogStore
import HTTPServer

/// A route's work, given the request and its caller.
enum Endpoint: Sendable {
    /// Runs on the event loop: microseconds, never blocking (a read, a rendering).
    case inline(@Sendable (HTTPRequest, Caller) throws -> HTTPResponse)
    /// Starts work that answers later through the completion (a durable write).
    case later(@Sendable (HTTPRequest, Caller, @escaping Completion) throws -> Void)
    /// As ``later``, for work that may wait long for its answer (a long-poll): it is told
    /// whether the client has gone, so it can stop waiting. It reads nothing on the
    /// calling thread (its reads run on a pool of its own), so once its caller is known it
    /// starts where the request arrived.
    case waiting(@Sendable (HTTPRequest, Caller, _ isAbandoned: @escaping @Sendable () -> Bool, @escaping Completion) throws -> Void)
    /// Runs on the pool reserved for blocking work (a backup); the last argument says
    /// whether the client has gone (long work stops early then).
    case blocking(@Sendable (HTTPRequest, Caller, _ isAbandoned: @escaping @Sendable () -> Bool) throws -> HTTPResponse)
    /// A read that runs on the event loop when `isExpensive` says the request is cheap,
    /// and otherwise on the small pool reserved for expensive reads (searches,
    /// geographic lists), under that pool's larger ``ReadBudget``.
    case read(isExpensive: @Sendable (HTTPRequest) -> Bool, @Sendable (HTTPRequest, Caller) throws -> HTTPResponse)
}

/// The caller a request's admission check found from its head, handed to its handler.
final class Admitted: Sendable {
    let caller: Caller
    init(caller: Caller) { self.caller = caller }
}

/// The largest request bodies, by what a route reads. Each fits the largest legal
/// document with room to spare (every text at its byte limit, even written with `\u`
/// escapes), so a client cannot make the server hold or parse more than a document can be.
enum BodyLimits {
    /// One resource, comment, user, key or entry (the default): 256 KiB.
    static let document = 256 * 1024
    /// A whole playlist order or an import: the server's body limit (`--max-body-size`).
    static let unbounded = Int.max
}

/// The pool that serves every request that reads the database when reads wait on a
/// network (PostgreSQL): no event loop ever waits for the database. Its threads each
/// hold a read connection while they work; a full queue answers 503 at once.
enum DatabaseWork {
    static let threads = 16
    static let pool = WorkPool(name: "database", threads: threads, queueLimit: 1024)
}

/// The pool where requests with large bodies are read and run (``BodyLimits``): half the
/// cores, so the event loops always keep one, and a short queue (a full one answers 503).
enum LargeBodies {
    /// The largest body read on an event loop (a third of a millisecond to parse, at most).
    static let onLoop = 32 * 1024
    static let pool = WorkPool(name: "bodies", threads: max(1, ProcessInfo.processInfo.activeProcessorCount / 2), queueLimit: 64)
}

/// The pool for expensive reads: half the cores, so the event loops always keep a core,
/// and a short queue (a full one answers 503 at once).
enum ExpensiveReads {
    static let threads = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
    static let pool = WorkPool(name: "reads", threads: threads, queueLimit: 64)
    /// The work one expensive read may do before it is interrupted.
    static let allowance: Duration = .seconds(1)
}

/// The service's routes, each registered with who may call it (``Access``): the router
/// authenticates the caller, spends from its rate budget and checks its role before the
/// endpoint runs. Every route is listed in ``table``, which the role × route test walks.
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

    init(authenticator: Authenticator, readsNeedCredential: Bool, limiter: RateLimiter?, idempotency: Idempotency, databaseWork: WorkPool? = nil,
         publicMaxAge: Int? = nil) {
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
    mutating func add(_ method: HTTPMethod, _ pattern: String, _ access: Access, rate: RateClass? = nil, timeout: Duration? = nil,
                      usesDatabase: Bool = true, maxBody: Int = BodyLimits.document, caching: Caching? = nil, replaysAnswers: Bool = true,
                      _ endpoint: Endpoint) {
        table.append((method, pattern, access))
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
    private static func offLoop(_ body: @escaping HandlerBody, on pool: WorkPool,
                                when selects: (@Sendable (HTTPRequest) -> Bool)? = nil) -> HandlerBody {
        { request, responder in
            if let selects, !selects(request) { return try body(request, responder) }
            guard submit(on: pool, for: responder, { try body(request, responder) }) else { throw WorkPool.busy }
            return nil
        }
    }

    /// Queues `work` on `pool`: what it returns answers `responder`'s request (`nil`: it
    /// answers later), and so does its error; it is dropped unrun when the client has gone
    /// before its turn.
    /// - Returns: false when the pool's queue is full.
    private static func submit(on pool: WorkPool, for responder: Responder, _ work: @escaping @Sendable () throws -> HTTPResponse?) -> Bool {
        pool.submit {
            guard !responder.isAbandoned else { return }
            do {
                if let response = try work() { responder.respond(response) }
            } catch {
                responder.fail(error)
            }
        }
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
    private func handler(_ access: Access, _ fixedRate: RateClass?, _ idempotency: (Idempotency, replays: Bool)?, _ caching: Caching,
                         pool: WorkPool?, _ endpoint: Endpoint) -> HandlerBody {
        let serving = Serving(endpoint: endpoint, minimum: minimum(access), idempotency: idempotency, caching: caching, maxAge: publicMaxAge,
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
            guard Self.submit(on: pool, for: responder, { try serving.authenticating(request, responder, rate, expensive) }) else {
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

        init(endpoint: Endpoint, minimum: Role?, idempotency: (Idempotency, replays: Bool)?, caching: Caching, maxAge: Int?,
             limiter: RateLimiter?, authenticator: Authenticator) {
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
        func proceed(_ request: HTTPRequest, _ responder: Responder, _ caller: Caller, _ rate: RateClass, _ expensive: Bool,
                     on pool: WorkPool?) throws -> HTTPResponse? {
            let delivery = Delivery(responder: responder, headers: try Routes.spend(limiter, rate, caller, request),
                                    finishing: caching.finishing(request, caller, maxAge: maxAge))
            guard let pool else { return try Routes.serve(endpoint, request, caller, minimum, delivery, idempotency, expensive: expensive) }
            try delivery.guarding {
                let queued = Routes.submit(on: pool, for: responder) {
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
    private static func serve(_ endpoint: Endpoint, _ request: HTTPRequest, _ caller: Caller, _ minimum: Role?, _ delivery: consuming Delivery,
                              _ idempotency: (Idempotency, replays: Bool)?, expensive: Bool) throws -> HTTPResponse? {
        try delivery.guarding { try Self.authorize(caller, minimum) }
        if let (idempotency, replays) = idempotency {
            switch try delivery.guarding({ try idempotency.start(request, caller) }) {
            case nil: break
            case let .replay(response)?: return try delivery.finish(response).adding(delivery.headers)
            case let .claimed(claim)?: delivery.claim = Delivery.Claim(idempotency: idempotency, claim: claim, keepsAnswer: replays)
            }
        }
        let response: HTTPResponse?
        if request.method == .GET || request.method == .HEAD {
            response = try run(endpoint, request, caller, delivery, expensive: expensive)
        } else {
            // A write queued for this request is dropped if its client goes before its turn,
            // and its answer is made on the request's event loop, not on the writer's thread.
            // An answer to keep for an Idempotency-Key is made inside the write's transaction
            // too, and kept there: both commit, or neither.
            let responder = delivery.responder
            response = try WriteContext.submitting(abandonedWhen: { responder.isAbandoned }, answeredOn: { responder.perform($0) }) {
                guard delivery.claim?.keepsAnswer == true else { return try run(endpoint, request, caller, delivery, expensive: expensive) }
                return try WriteContext.answeringInTransaction { try run(endpoint, request, caller, delivery, expensive: expensive) }
            }
        }
        guard let response else { return nil }
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
            try delivery.guarding { try body(request, caller) { delivery.complete($0) } }
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

/// Where an endpoint's answer goes, with the fields every answer to the request carries
/// (its rate limit), on success and failure alike, what finishes a successful answer (its
/// caching, ``Caching``), and the claim on its `Idempotency-Key` that the answer settles,
/// if any.
struct Delivery: Sendable {
    /// A claim on a key, with what settles it.
    struct Claim: Sendable {
        let idempotency: Idempotency
        let claim: Idempotency.Claim
        /// Whether the answer is kept for a retry to replay.
        let keepsAnswer: Bool
    }

    let responder: Responder
    let headers: [(name: String, value: String)]
    /// Finishes an endpoint's answer: its caching fields, and a `304` in its place when
    /// the request's `If-None-Match` lists its tag.
    let finishing: Finishing
    var claim: Claim?

    init(responder: Responder, headers: [(name: String, value: String)], finishing: Finishing) {
        self.responder = responder
        self.headers = headers
        self.finishing = finishing
    }

    /// `response` finished (``Finishing``).
    func finish(_ response: consuming HTTPResponse) throws -> HTTPResponse {
        try finishing.apply(consume response)
    }

    /// Sends `response`, which carries the fields already: once it is kept, when the
    /// request holds a claim.
    func deliver(_ response: HTTPResponse) {
        guard let claim else { return responder.respond(response) }
        claim.idempotency.settle(claim.claim, with: claim.keepsAnswer ? response : nil) { responder.respond(response) }
    }

    /// Sends what a later answer brought: the response finished with the fields added, or its
    /// error. Made inside its write's transaction (``WriteContext/capture``), the answer is
    /// only kept there for its `Idempotency-Key`, and sent once the write is durable.
    func complete(_ result: Result<HTTPResponse, any Error>) {
        if let transaction = WriteContext.capture {
            if let claim, claim.keepsAnswer, case let .success(response) = result, let finished = try? finish(response) {
                claim.idempotency.keep(claim.claim, finished.adding(headers), in: transaction)
            }
            return
        }
        switch result.flatMap({ response in Result { try finish(response) } }) {
        case let .success(response): deliver(response.adding(headers))
        case let .failure(error): fail(error)
        }
    }

    /// Sends the answer `error` makes, with the fields.
    func fail(_ error: any Error) {
        release()
        responder.fail(headers.isEmpty ? error : ErrorWithHeaders(error: error, headers: headers))
    }

    /// Gives up the claim without keeping an answer.
    private func release() {
        if let claim { claim.idempotency.settle(claim.claim, with: nil) {} }
    }

    /// What `body` returns, or its error carrying the fields (the claim given up).
    func guarding<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            release()
            throw headers.isEmpty ? error : ErrorWithHeaders(error: error, headers: headers)
        }
    }

    /// The response `body` makes, finished, with the fields added, or its error carrying them.
    func answering(_ body: () throws -> HTTPResponse) throws -> HTTPResponse {
        try guarding { try finish(body()) }.adding(headers)
    }

    /// Runs `work` on `pool` and delivers its answer: 503 at once when the pool's queue is
    /// full, nothing when the client has gone before its turn.
    func run(on pool: WorkPool, _ work: @escaping @Sendable () throws -> HTTPResponse) {
        let queued = pool.submit {
            guard !responder.isAbandoned else { return release() }
            do { deliver(try answering(work)) } catch { responder.fail(error) }
        }
        if !queued { fail(WorkPool.busy) }
    }
}

extension HTTPResponse {
    /// The response with `extra` fields appended (consumed: no copy of its fields and body).
    consuming func adding(_ extra: [(name: String, value: String)]) -> HTTPResponse {
        guard !extra.isEmpty else { return self }
        var response = self
        response.headers += extra
        return response
    }
}
