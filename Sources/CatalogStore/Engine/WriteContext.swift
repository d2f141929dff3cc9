import Foundation

/// What the code that submits a write knows of its request, bound to the submitting
/// thread around the submission (a thread-local value: submissions come from event
/// loops and pool threads, not tasks).
public enum WriteContext {
    private final class Context: @unchecked Sendable {
        let isAbandoned: (@Sendable () -> Bool)?
        let answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)?
        /// Whether the answer is also made inside the write's transaction (``Capture``).
        var answersInTransaction = false
        /// While an answer is made inside a transaction: where it may write.
        var capture: Capture?
        init(_ isAbandoned: (@Sendable () -> Bool)?, _ answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)?) {
            self.isAbandoned = isAbandoned
            self.answer = answer
        }
    }

    /// A write's transaction while its answer is made inside it: what the answer's code
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

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private static var current: Context? {
        pthread_getspecific(key).map { Unmanaged<Context>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Whether the write being submitted has lost its client; `nil` outside ``submitting(abandonedWhen:answeredOn:_:)``.
    static var isAbandoned: (@Sendable () -> Bool)? { current?.isAbandoned }

    /// Where the write being submitted wants its completion run; `nil` (on the writer's
    /// thread, after the commit) outside ``submitting(abandonedWhen:answeredOn:_:)``.
    static var answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)? { current?.answer }

    /// Runs `body`, the writes it submits being told:
    /// - `isAbandoned`: whether their client has gone (a write whose client has gone
    ///   before its turn is dropped unrun);
    /// - `answer`: where to run their completions. It takes each completion from the
    ///   writer's thread (which then goes on to the next batch) and runs it soon
    ///   elsewhere, such as on the request's event loop, in the order it was given them.
    ///   `nil` runs them on the writer's thread. A caller that waits for a write's
    ///   completion on the thread `answer` runs it on must not pass `answer`.
    public static func submitting<T>(abandonedWhen isAbandoned: (@Sendable () -> Bool)? = nil,
                                     answeredOn answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil,
                                     _ body: () throws -> T) rethrows -> T {
        let context = Context(isAbandoned, answer)
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(context).toOpaque())
        defer {
            pthread_setspecific(key, previous)
            withExtendedLifetime(context) {}
        }
        return try body()
    }

    /// Whether the writes being submitted make their answer inside their transaction too.
    static var answersInTransaction: Bool { current?.answersInTransaction ?? false }

    /// The transaction an answer is being made in, while the completion of a write that
    /// ``answeringInTransaction(_:)`` runs inside it; `nil` at any other time.
    public static var capture: Capture? { current?.capture }

    /// Runs `body`, the writes it submits (within ``submitting(abandonedWhen:answeredOn:_:)``)
    /// making their answer twice: once inside their transaction, where ``capture`` lets it
    /// write (and its failure rolls the write back), then as usual once durable. Their
    /// completions must be free of effects but the answer's (mapping a result to a response).
    public static func answeringInTransaction<T>(_ body: () throws -> T) rethrows -> T {
        guard let context = current else { return try body() }
        let previous = context.answersInTransaction
        context.answersInTransaction = true
        defer { context.answersInTransaction = previous }
        return try body()
    }

    /// `work`, for a write submitted now: when its answer is made inside its transaction
    /// (``answeringInTransaction(_:)``), `completion` runs there after `work`, with
    /// ``capture`` set; a failure of what it writes fails the write.
    static func wrapping<T>(_ work: @escaping (any SQLConnection) throws -> T,
                            completion: @escaping @Sendable (Result<T, any Error>) -> Void) -> (any SQLConnection) throws -> T {
        guard answersInTransaction else { return work }
        return { db in
            let result = try work(db)
            let capture = Capture(db)
            let context = Context(nil, nil)
            context.capture = capture
            let previous = pthread_getspecific(key)
            pthread_setspecific(key, Unmanaged.passUnretained(context).toOpaque())
            defer {
                pthread_setspecific(key, previous)
                withExtendedLifetime(context) {}
            }
            completion(.success(result))
            if let failure = capture.failure { throw failure }
            return result
        }
    }

    /// Runs `body`, the writes it submits still dropped unrun if their client has gone, but
    /// answered on the writer's thread right after their commit, before its next batch:
    /// for answers that must take effect before any later write runs, such as forgetting
    /// the credentials a revoked key or a changed role no longer grants.
    public static func answeredAtCommit<T>(_ body: () throws -> T) rethrows -> T {
        try submitting(abandonedWhen: isAbandoned, body)
    }
}
