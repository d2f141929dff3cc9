import CatalogModels
import CatalogStore
import HTTPServer

/// The way a request to a route that needs a caller goes, made once per route
/// (``Routes/add(_:_:_:rate:timeout:usesDatabase:maxBody:bodyPassesServerLimit:caching:replaysAnswers:_:)``):
/// its stages are values, held in the order a request passes them, each with one job.
/// Their methods are called directly (no chain of closures, no protocol): the inline
/// path costs what the work costs.
///
/// 1. ``identification``: who calls, from memory when it can tell (anonymous, a remembered
///    key or token), else from the database (on the route's pool when that blocks).
/// 2. ``budget``: the caller's rate budget; a refusal is answered where the request is.
/// 3. ``authorization``: the caller's role against the route's.
/// 4. ``replay``: an `Idempotency-Key`'s kept answer, or a claim the answer settles.
/// 5. ``execution``: the endpoint, where it runs (event loop, pool, writer).
/// 6. ``answer``: the answer's caching, with the rate fields (``Delivery``).
final class Pipeline: Sendable {
    let identification: Identification
    let budget: Budget
    let authorization: Authorization
    let replay: Replay?
    let execution: Execution
    let answer: Answering

    init(identification: Identification, budget: Budget, authorization: Authorization, replay: Replay?, execution: Execution, answer: Answering) {
        self.identification = identification
        self.budget = budget
        self.authorization = authorization
        self.replay = replay
        self.execution = execution
        self.answer = answer
    }

    /// What a request with a body passes before its body is read: a credential known bad
    /// is a 401, a caller known to lack the role a 401 or 403, spending from the same budget
    /// as when the handler refuses it. A caller not known without reading the database
    /// passes; its handler checks it with the body. What it returns (``Admitted``) is the
    /// handler's caller: not looked up again.
    func admit(_ request: HTTPRequest, rate: RateClass) throws -> (any AnyObject & Sendable)? {
        let caller: Caller?
        do {
            caller = try identification.known(request)
        } catch {
            throw try budget.refusing(error, rate, .anonymous, request)
        }
        guard let caller else { return nil }
        do {
            try authorization.check(caller)
        } catch {
            throw try budget.refusing(error, rate, caller, request)
        }
        return Admitted(caller: caller)
    }

    /// Serves `request`: its response now, or `nil` when it answers through `responder`.
    /// With a pool (a shared database), a caller known without reading the database spends
    /// its budget where the request arrived, so a refusal never waits for the pool, and
    /// only the rest runs there; finding out who an unknown credential belongs to runs
    /// there too.
    func handle(_ request: HTTPRequest, _ responder: Responder) throws -> HTTPResponse? {
        // Decided once: what it costs sets both the budget it spends and where it runs.
        let expensive = execution.isExpensive(request, budgeted: budget.limiter != nil)
        let rate = budget.rate(request, expensive: expensive)
        // A caller the head's admission check found is not looked up again.
        if let admitted = request.admitted as? Admitted {
            return try proceed(request, responder, admitted.caller, rate, expensive, hopping: true)
        }
        guard let pool = execution.pool else { return try identifying(request, responder, rate, expensive) }
        let known: Caller?
        do {
            known = try identification.known(request)
        } catch {
            throw try budget.refusing(error, rate, .anonymous, request)
        }
        if let known { return try proceed(request, responder, known, rate, expensive, hopping: true) }
        guard Routes.submit(request, on: pool, for: responder, { try self.identifying(request, responder, rate, expensive) }) else {
            throw WorkPool.busy
        }
        return nil
    }

    /// Finds out who the caller is (reading the database if need be) and proceeds, where it is.
    private func identifying(_ request: HTTPRequest, _ responder: Responder, _ rate: RateClass, _ expensive: Bool) throws -> HTTPResponse? {
        let outcome: Authenticator.Outcome
        do {
            outcome = try identification.lookUp(request)
        } catch {
            // A credential that fails spends from its address's budget.
            throw try budget.refusing(error, rate, .anonymous, request)
        }
        switch outcome {
        case let .now(caller):
            return try proceed(request, responder, caller, rate, expensive, hopping: false)
        case let .later(wait):
            wait { result in
                // The caller's user was just created; go on off the writer's thread.
                let queued = Handler.runBlocking {
                    do {
                        if let response = try self.proceed(request, responder, try result.get(), rate, expensive, hopping: false) {
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

    /// Spends `caller`'s budget, then serves the request: on the route's pool when
    /// `hopping` from where it arrived and the endpoint runs there, else where it is.
    private func proceed(
        _ request: HTTPRequest, _ responder: Responder, _ caller: Caller, _ rate: RateClass, _ expensive: Bool, hopping: Bool
    ) throws -> HTTPResponse? {
        let delivery = Delivery(responder: responder, headers: try budget.spend(rate, caller, request), finishing: answer.finishing(request, caller))
        guard hopping, let pool = execution.endpointPool else { return try serve(request, caller, delivery, expensive: expensive) }
        try delivery.guarding {
            let queued = Routes.submit(request, on: pool, for: responder) { try self.serve(request, caller, delivery, expensive: expensive) }
            guard queued else { throw WorkPool.busy }
        }
        return nil
    }

    /// Authorizes `caller`, settles its `Idempotency-Key` and runs the endpoint: the
    /// response when it has one now, `nil` when it answers through `delivery`. Errors carry
    /// the delivery's fields.
    private func serve(_ request: HTTPRequest, _ caller: Caller, _ delivery: consuming Delivery, expensive: Bool) throws -> HTTPResponse? {
        try delivery.guarding { try authorization.check(caller) }
        if let replay {
            switch try delivery.guarding({ try replay.idempotency.start(request, caller) }) {
            case nil: break
            case let .replay(response)?: return try delivery.finish(response).adding(delivery.headers)
            case let .claimed(claim)?:
                delivery.claim = Delivery.Claim(idempotency: replay.idempotency, claim: claim, keeping: replay.replays ? TransactionAnswer() : nil)
            }
        }
        guard let response = try execution.run(request, caller, delivery, expensive: expensive) else { return nil }
        guard delivery.claim != nil else { return response }
        // The answer is kept before it goes out.
        delivery.deliver(response)
        return nil
    }
}

/// Who calls (``Pipeline``, stage 1).
struct Identification: Sendable {
    let authenticator: Authenticator

    /// The caller, when known without reading the database (anonymous, a remembered
    /// credential); `nil` otherwise. Throws 401 for a credential known bad.
    func known(_ request: HTTPRequest) throws -> Caller? { try authenticator.knownCaller(request) }

    /// The caller, looked up (reading the database if need be).
    func lookUp(_ request: HTTPRequest) throws -> Authenticator.Outcome { try authenticator.authenticate(request) }
}

/// The caller's rate budget (``Pipeline``, stage 2).
struct Budget: Sendable {
    /// The budgets; `nil` when rate limits are off.
    let limiter: RateLimiter?
    /// The budget the route spends from when not what its method says.
    let fixed: RateClass?

    /// The budget `request` spends from: the route's own, else expensive for an expensive
    /// read, reads for `GET` and `HEAD`, writes otherwise.
    func rate(_ request: HTTPRequest, expensive: Bool) -> RateClass {
        fixed ?? (expensive ? .expensive : request.method == .GET || request.method == .HEAD ? .read : .write)
    }

    /// Spends one token of `rate` from the caller's budget (its user's, whatever key or
    /// token it came with; its address's when anonymous).
    /// - Returns: the rate limit fields for the response.
    /// - Throws: 429 with those fields and `Retry-After` when the budget is spent.
    func spend(_ rate: RateClass, _ caller: Caller, _ request: HTTPRequest) throws -> [(name: String, value: String)] {
        guard let limiter else { return [] }
        let decision = limiter.take(rate, partition: RateLimiter.partition(caller, request))
        guard decision.allowed else { throw ErrorWithHeaders(error: APIError.tooManyRequests(rate), headers: decision.headers) }
        return decision.headers
    }

    /// `error`, a refusal, carrying the rate fields of the token it spent from `caller`'s
    /// budget (a refusal is not free: it costs what the request would have).
    func refusing(_ error: any Error, _ rate: RateClass, _ caller: Caller, _ request: HTTPRequest) throws -> any Error {
        ErrorWithHeaders(error: error, headers: try spend(rate, caller, request))
    }
}

/// The caller's role against the route's (``Pipeline``, stage 3).
struct Authorization: Sendable {
    /// The least role the route needs; `nil` when anyone may call it.
    let minimum: Role?

    /// 401 when the caller is anonymous and the route needs a role, 403 when its role is too low.
    func check(_ caller: Caller) throws(APIError) {
        guard let minimum else { return }
        guard caller.role != nil else { throw APIError.unauthenticated }
        guard caller.has(minimum) else { throw APIError.forbidden("This needs the \(minimum.rawValue) role or a higher one.") }
    }
}

/// What makes a `POST` with an `Idempotency-Key` run once (``Pipeline``, stage 4).
struct Replay: Sendable {
    let idempotency: Idempotency
    /// Whether the answer is kept for a retry to replay (not an answer with a secret).
    let replays: Bool
}

/// The endpoint, and where it runs (``Pipeline``, stage 5).
struct Execution: Sendable {
    let endpoint: Endpoint
    /// Where requests that touch the database run when reads must stay off the event loops
    /// (PostgreSQL); `nil` when they may run where they arrive.
    let pool: WorkPool?

    /// Where the endpoint runs once its caller is known: a waiting endpoint queues its own
    /// reads, so it needs the pool for authentication only.
    var endpointPool: WorkPool? {
        switch endpoint {
        case .waiting, .read(_, _, onLoop: .some): nil
        default: pool
        }
    }

    /// Whether `request` is an expensive read of a `.read` endpoint (which runs it on its
    /// pool), or, when it is `budgeted` (rate limits are on), an expensive request of an
    /// `.inlineOrLater` one (for which it decides only the budget, so it is not asked otherwise).
    func isExpensive(_ request: HTTPRequest, budgeted: Bool) -> Bool {
        switch endpoint {
        case let .read(isExpensive, _, _): return isExpensive(request)
        case let .inlineOrLater(isExpensive, _): return budgeted && isExpensive(request)
        default: return false
        }
    }

    /// Runs the endpoint: its response when it has one now, `nil` when it answers through
    /// `delivery`. An `expensive` read runs on the expensive reads' pool, unless it is sent
    /// from the event loop (PostgreSQL: ``LoopStart``).
    func run(_ request: HTTPRequest, _ caller: Caller, _ delivery: Delivery, expensive: Bool) throws -> HTTPResponse? {
        switch endpoint {
        case let .inline(body):
            return try delivery.answering { try body(request, caller) }
        case let .later(body):
            try delivery.guarding { try body(request, caller, delivery.writeOptions) { delivery.complete($0) } }
            return nil
        case let .inlineOrLater(_, body):
            guard let response = try delivery.guarding({ try body(request, caller) { delivery.complete($0) } }) else { return nil }
            return try delivery.answering { response }
        case let .waiting(body):
            let responder = delivery.responder
            try delivery.guarding { try body(request, caller, { responder.isAbandoned }) { delivery.complete($0) } }
            return nil
        case let .receiving(body):
            try delivery.guarding { try body(request, caller, delivery.responder) { delivery.complete($0) } }
            return nil
        case let .blocking(body):
            let responder = delivery.responder
            delivery.run(on: WorkPool.blocking, for: RateLimiter.partition(caller, request)) { try body(request, caller, { responder.isAbandoned }) }
            return nil
        case let .read(_, body, onLoop):
            let responder = delivery.responder
            let elsewhere: () -> Void
            if expensive {
                // In the caller's line: one caller's searches cannot fill the pool for the others.
                elsewhere = {
                    delivery.run(on: ExpensiveReads.pool, for: RateLimiter.partition(caller, request)) {
                        ReadBudget.allow(ExpensiveReads.allowance)
                        return try body(request, caller)
                    }
                }
            } else {
                // Inline where reads do not wait (no pool), or without a way to read from the
                // loop (then on the pool already), or on the pool already because the caller
                // had to be looked up there (off its loop's thread).
                guard let pool, onLoop != nil, responder.loop?.isCurrent != false else { return try delivery.answering { try body(request, caller) } }
                elsewhere = { delivery.run(on: pool, for: RateLimiter.partition(caller, request)) { try body(request, caller) } }
            }
            // Sent from the loop where reads wait on a network, an expensive one as a heavy
            // read (``ResourceStore/renderedListOnLoop(_:caller:reactor:isAbandoned:completion:)``);
            // elsewhere when answered in process (no loop), off the loop's thread, or when the
            // loop cannot take it.
            guard pool != nil, let onLoop, let loop = responder.loop, loop.isCurrent else {
                elsewhere()
                return nil
            }
            let started = try delivery.guarding {
                try onLoop(request, caller, LoopReactor(loop: loop), { responder.isAbandoned }, elsewhere) { delivery.complete($0) }
            }
            if !started { elsewhere() }
            return nil
        }
    }
}

/// How the answer may be cached (``Pipeline``, stage 6).
struct Answering: Sendable {
    let caching: Caching
    /// The `max-age` of shared answers; `nil`: `no-cache`.
    let maxAge: Int?
    /// What signs media paths, when playback must be signed.
    let signer: PlaybackSigner?

    /// What finishes `caller`'s answer to `request` (``Caching``).
    func finishing(_ request: HTTPRequest, _ caller: Caller) -> Finishing {
        caching.finishing(request, caller, maxAge: maxAge, signer: signer)
    }
}
