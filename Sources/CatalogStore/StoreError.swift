import CatalogModels

/// Failures of the store that callers map to responses. Storage-engine errors never
/// leave the store as anything but these.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The request's content does not fit the current data (an unknown item, a position
    /// past the end): one error per field.
    case invalid([FieldError])
    /// No resource has this id.
    case notFound
    /// A precondition (`If-Match`, `If-None-Match`) is false; `current` is the
    /// resource's version.
    case preconditionFailed(current: Int)
    /// A list cursor that is malformed, or was made for another sort or filter.
    case invalidCursor(String)
    /// A write conflicts with existing data.
    case conflict(String)
    /// The caller already owns as many resources of this kind as one user may.
    case quotaExceeded(String)
    /// The database is busy, full or failing; the request may be retried.
    case unavailable(String)
    /// A read needed more work than one request may take (see ``ReadBudget``).
    case tooExpensive
    /// The change feed cannot continue from a sync token (too old, from another catalog,
    /// ahead of the log, or before purged deletions): the reader must start again.
    case syncTokenExpired(String)

    /// The explanation, for logs and command-line messages.
    public var description: String {
        switch self {
        case let .invalid(errors): errors.map { "\($0.pointer): \($0.message)" }.joined(separator: "; ")
        case .notFound: "not found"
        case let .preconditionFailed(current): "precondition failed (current version \(current))"
        case let .invalidCursor(detail), let .conflict(detail), let .unavailable(detail), let .quotaExceeded(detail), let .syncTokenExpired(detail): detail
        case .tooExpensive: "the read needed more work than one request may take"
        }
    }
}

/// An error raised by a storage engine, with its message.
protocol EngineError: Error {
    /// The engine's explanation.
    var engineMessage: String { get }
    /// The store error a caller sees.
    var storeError: StoreError { get }
}

extension SQLError: EngineError {
    var engineMessage: String { message }

    var storeError: StoreError {
        switch kind {
        case .constraint: .conflict("The change conflicts with existing data.")
        case .busy, .retry: .unavailable("The database is busy; retry shortly.")
        case .interrupted: .tooExpensive
        case .full: .unavailable("The database is full.")
        case .connection: .unavailable("The database cannot be reached; retry shortly.")
        case .other: .unavailable("The database failed to complete the request.")
        }
    }
}

extension StoreError {
    /// Maps storage-engine errors to store errors; store errors pass through.
    static func from(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? any EngineError { return error.storeError }
        return .unavailable("The request could not be completed.")
    }
}

/// Runs `body`, mapping any error to ``StoreError``.
func guarded<T>(_ body: () throws -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch {
        throw StoreError.from(error)
    }
}
