/// A path pattern such as `/v1/games/{id}`: literal segments and `{name}` parameters.
public struct RoutePattern: Sendable, Hashable, CustomStringConvertible {
    enum Segment: Sendable, Hashable {
        case literal(String)
        case parameter(String)
    }

    let segments: [Segment]

    /// The pattern as written, such as `/v1/games/{id}`.
    public let description: String

    /// Parses a pattern. Segments are separated by `/`; a segment `{name}` captures one
    /// whole path segment.
    public init(_ pattern: String) {
        description = pattern
        segments = pattern.split(separator: "/", omittingEmptySubsequences: true).map { segment in
            if segment.hasPrefix("{"), segment.hasSuffix("}") {
                return .parameter(String(segment.dropFirst().dropLast()))
            }
            return .literal(String(segment))
        }
    }

    /// Matches percent-decoded path segments, returning the captured parameters.
    func match(_ pathSegments: [String]) -> PathParameters? {
        guard pathSegments.count == segments.count else { return nil }
        var parameters = PathParameters()
        for (segment, value) in zip(segments, pathSegments) {
            switch segment {
            case let .literal(literal):
                guard literal == value else { return nil }
            case let .parameter(name):
                guard !value.isEmpty else { return nil }
                parameters.append(name: name, value: value)
            }
        }
        return parameters
    }
}
