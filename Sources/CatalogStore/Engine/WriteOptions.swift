/// What the code that submits a write knows of its request, passed with the write:
/// whether its client has gone, where its answer is made, and whether that answer is made
/// inside the write's transaction too. The default (``init(abandonedWhen:answeredOn:answeringIn:)``
/// with no argument) is a write someone always waits for, answered on the writer's thread.
public struct WriteOptions: Sendable {
    /// Whether nobody waits for the answer any more: a write whose client has gone before
    /// its turn is dropped unrun. `nil`: someone always waits.
    public let isAbandoned: (@Sendable () -> Bool)?
    /// Where the completion runs: it takes the completion from the writer's thread (which
    /// then goes on to its next batch) and runs it soon elsewhere, such as on the request's
    /// event loop, completions in the order given. `nil` runs it on the writer's thread
    /// right after the commit. A caller that waits for the completion on the thread
    /// `answer` runs it on must not pass `answer`.
    public let answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)?
    /// When set, the answer is made twice: once inside the write's transaction, where
    /// ``TransactionAnswer/capture`` lets it write (and its failure rolls the write back),
    /// then as usual once durable. The completion must then be free of effects but the
    /// answer's (mapping a result to a response).
    public let inTransaction: TransactionAnswer?
    /// Whether it is the server's own background work (webhook bookkeeping), which the
    /// writer runs when no request's write waits, or else within a small share of its
    /// time (``GroupCommit/backgroundShare``): requests' writes never queue behind much of it.
    public var background = false

    /// Options for a write.
    /// - Parameters:
    ///   - isAbandoned: whether its client has gone (``isAbandoned``).
    ///   - answer: where its completion runs (``answer``).
    ///   - inTransaction: set to make the answer inside the transaction too (``inTransaction``).
    public init(
        abandonedWhen isAbandoned: (@Sendable () -> Bool)? = nil,
        answeredOn answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil,
        answeringIn inTransaction: TransactionAnswer? = nil
    ) {
        self.isAbandoned = isAbandoned
        self.answer = answer
        self.inTransaction = inTransaction
    }

    /// The same write, still dropped unrun if its client has gone, but answered on the
    /// writer's thread right after its commit, before the writer's next batch: for answers
    /// that must take effect before any later write runs, such as forgetting the
    /// credentials a revoked key or a changed role no longer grants.
    /// Such an answer has effects of its own, so it is not made inside the transaction too.
    public var answeredAtCommit: WriteOptions {
        WriteOptions(abandonedWhen: isAbandoned)
    }

    /// A write of the server's own background work (``background``), answered on the
    /// writer's thread.
    public static var inBackground: WriteOptions {
        var options = WriteOptions()
        options.background = true
        return options
    }

    /// `work`, made to run the completion inside the transaction after it when
    /// ``inTransaction`` asks; a failure of what the completion writes there fails the write.
    func wrapping<T>(
        _ work: @escaping (any SQLConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) -> (any SQLConnection) throws -> T {
        guard let inTransaction else { return work }
        return { db in
            let result = try work(db)
            let capture = TransactionAnswer.Capture(db)
            // One write per request: a second would share this place with the first.
            assert(inTransaction.capture == nil, "a TransactionAnswer serves one write")
            inTransaction.capture = capture
            defer { inTransaction.capture = nil }
            completion(.success(result))
            if let failure = capture.failure { throw failure }
            return result
        }
    }
}

/// Where a request's answer is made inside its write's transaction (``WriteOptions/inTransaction``):
/// one per request, given to the write and kept by what makes the answer, which finds the
/// transaction in ``capture`` while its completion runs there.
///
/// Only the write's writer thread sets ``capture``, around the completion it runs inside
/// the transaction; the completion made once the write is durable runs after that, handed
/// over through the write's ``WriteOptions/answer``, and finds `nil`.
public final class TransactionAnswer: @unchecked Sendable {
    /// The write's transaction while the answer is made inside it: what the answer's code
    /// may write there (the answer to keep for an `Idempotency-Key`), so that it commits,
    /// or rolls back, with the write.
    public final class Capture {
        let db: any SQLConnection
        var failure: (any Error)?

        init(_ db: any SQLConnection) { self.db = db }

        /// Runs `body` on the write's connection; an error rolls the write back.
        func run(_ body: (any SQLConnection) throws -> Void) {
            guard failure == nil else { return }
            do { try body(db) } catch { failure = error }
        }
    }

    /// The transaction the answer is being made in, while the write's completion runs
    /// inside it; `nil` at any other time.
    public fileprivate(set) var capture: Capture?

    /// A place for one request's answer.
    public init() {}
}
