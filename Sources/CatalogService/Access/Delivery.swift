import CatalogStore
import HTTPServer

/// Where an endpoint's answer goes, with the fields every answer to the request carries
/// (its rate limit), on success and failure alike, what finishes a successful answer (its
/// caching, ``Caching``), and the claim on its `Idempotency-Key` that the answer settles,
/// if any.
struct Delivery: Sendable {
    /// A claim on a key, with what settles it.
    struct Claim: Sendable {
        let idempotency: Idempotency
        let claim: Idempotency.Claim
        /// Where the answer is made inside its write's transaction, to be kept there for a
        /// retry to replay; `nil` when the answer is not kept (it holds a secret).
        let keeping: TransactionAnswer?
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

    /// What the request's writes are told: dropped unrun if its client has gone before
    /// their turn, answered on its event loop, not on the writer's thread, and, when its
    /// answer is kept for an `Idempotency-Key`, answered inside the write's transaction
    /// too, where the answer is kept: both commit, or neither.
    var writeOptions: WriteOptions {
        WriteOptions(
            abandonedWhen: { [responder] in responder.isAbandoned }, answeredOn: { [responder] in responder.perform($0) },
            answeringIn: claim?.keeping)
    }

    /// Sends `response`, which carries the fields already: once it is kept, when the
    /// request holds a claim.
    func deliver(_ response: HTTPResponse) {
        guard let claim else { return responder.respond(response) }
        claim.idempotency.settle(claim.claim, with: claim.keeping == nil ? nil : response) { responder.respond(response) }
    }

    /// Sends what a later answer brought: the response finished with the fields added, or its
    /// error. Made inside its write's transaction (``TransactionAnswer/capture``), the answer
    /// is only kept there for its `Idempotency-Key`, and sent once the write is durable.
    func complete(_ result: Result<HTTPResponse, any Error>) {
        if let claim, let keeping = claim.keeping, let transaction = keeping.capture {
            if case let .success(response) = result, let finished = try? finish(response) {
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

    /// Runs `work` on `pool`, in the line of `caller` (its share of the pool, taking turns
    /// with the others: ``WorkPool``), and delivers its answer: 503 at once when the pool's
    /// queue or the caller's share is full, nothing when the client has gone before its turn.
    func run(on pool: WorkPool, for caller: String, _ work: @escaping @Sendable () throws -> HTTPResponse) {
        let queued = pool.submit(for: caller) {
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
