/// The preconditions of a conditional write (RFC 9110 §13.1), evaluated inside the
/// write transaction against the version current at that moment.
public struct WritePreconditions: Sendable, Equatable {
    /// What an `If-Match` or `If-None-Match` field lists.
    public enum Tags: Sendable, Equatable {
        /// `*`: any current representation.
        case any
        /// These versions (an empty set matches nothing).
        case versions(Set<Int>)

        /// Whether the listed tags name `version`.
        public func matches(_ version: Int) -> Bool {
            switch self {
            case .any: true
            case let .versions(versions): versions.contains(version)
            }
        }
    }

    /// `If-Match` (strong comparison), or `nil` when absent.
    public var ifMatch: Tags?
    /// `If-None-Match`, or `nil` when absent.
    public var ifNoneMatch: Tags?

    /// Creates preconditions; both absent by default.
    public init(ifMatch: Tags? = nil, ifNoneMatch: Tags? = nil) {
        self.ifMatch = ifMatch
        self.ifNoneMatch = ifNoneMatch
    }

    /// Throws unless the write may proceed on a resource whose version is `current`
    /// (`nil`: it does not exist): 412 before 404, as RFC 9110 §13.2.2 orders them.
    func check(current: Int?) throws(StoreError) {
        if let ifMatch {
            guard let current, ifMatch.matches(current) else { throw .preconditionFailed(current: current) }
        }
        guard let current else { throw .notFound }
        if let ifNoneMatch, ifNoneMatch.matches(current) { throw .preconditionFailed(current: current) }
    }
}
