import Foundation

/// What the code that submits a write knows of its request, bound to the submitting
/// thread around the submission (a thread-local value: submissions come from event
/// loops and pool threads, not tasks).
public enum WriteContext {
    private final class Check: Sendable {
        let isAbandoned: @Sendable () -> Bool
        init(_ isAbandoned: @escaping @Sendable () -> Bool) { self.isAbandoned = isAbandoned }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Whether the write being submitted has lost its client; `nil` outside ``abandoning(when:_:)``.
    static var isAbandoned: (@Sendable () -> Bool)? {
        pthread_getspecific(key).map { Unmanaged<Check>.fromOpaque($0).takeUnretainedValue().isAbandoned }
    }

    /// Runs `body` with `isAbandoned` telling the writes it submits whether their client has gone.
    public static func abandoning<T>(when isAbandoned: @escaping @Sendable () -> Bool, _ body: () throws -> T) rethrows -> T {
        let check = Check(isAbandoned)
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(check).toOpaque())
        defer {
            pthread_setspecific(key, previous)
            withExtendedLifetime(check) {}
        }
        return try body()
    }
}
