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
    /// (`nil`: it does not exist). A missing resource is `notFound` whatever the
    /// preconditions say: RFC 9110 §13.2.1 has a server ignore preconditions when the
    /// request would fail without them, and this one would (we never create on PUT).
    package func check(current: Int?) throws(StoreError) {
        guard let current else { throw .notFound }
        if let ifMatch, !ifMatch.matches(current) { throw .preconditionFailed(current: current) }
        if let ifNoneMatch, ifNoneMatch.matches(current) { throw .preconditionFailed(current: current) }
    }
}
