import Foundation

/// What the code that submits a write knows of its request, bound to the submitting
/// thread around the submission (a thread-local value: submissions come from event
/// loops and pool threads, not tasks).
public enum WriteContext {
    private final class Context: Sendable {
        let isAbandoned: (@Sendable () -> Bool)?
        let answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)?
        init(_ isAbandoned: (@Sendable () -> Bool)?, _ answer: (@Sendable (@escaping @Sendable () -> Void) -> Void)?) {
            self.isAbandoned = isAbandoned
            self.answer = answer
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

    /// Runs `body`, the writes it submits still dropped unrun if their client has gone, but
    /// answered on the writer's thread right after their commit, before its next batch:
    /// for answers that must take effect before any later write runs, such as forgetting
    /// the credentials a revoked key or a changed role no longer grants.
    public static func answeredAtCommit<T>(_ body: () throws -> T) rethrows -> T {
        try submitting(abandonedWhen: isAbandoned, body)
    }
}
