/// Maps a method and a path to a handler.
///
/// Unknown paths are 404; a known path with another method is 405 with `Allow`;
/// `HEAD` is served by the `GET` route of the same path; `OPTIONS` on a known path
/// answers 204 with `Allow`.
public struct Router: Sendable {
    /// A class, so that looking one up per request retains it once rather than each field.
    final class Route: Sendable {
        let method: HTTPMethod
        let pattern: RoutePattern
        let handler: Handler

        init(method: HTTPMethod, pattern: RoutePattern, handler: Handler) {
            self.method = method
            self.pattern = pattern
            self.handler = handler
        }
    }

    private(set) var routes: [Route] = []
    /// The routes (their indices, in order) whose pattern starts with literal segments,
    /// by the pattern's length and its first two segments: only they and the routes of
    /// ``unindexed`` can match a path with that key.
    private var indexed: [Key: [Int]] = [:]
    /// The routes whose first two segments are not both literal, in order.
    private var unindexed: [Int] = []

    private struct Key: Hashable {
        let count: Int
        let first: String
        let second: String

        init?(_ segments: [RoutePattern.Segment]) {
            var literals: [String] = []
            for segment in segments.prefix(2) {
                guard case let .literal(text) = segment else { return nil }
                literals.append(text)
            }
            self.init(count: segments.count, literals)
        }

        init(count: Int, _ segments: some Collection<String>) {
            self.count = count
            first = segments.first ?? ""
            second = segments.dropFirst().first ?? ""
        }
    }

    /// Creates an empty router.
    public init() {}

    /// Registers `handler` for `method` requests whose path matches `pattern`.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: Handler) {
        let route = Route(method: method, pattern: RoutePattern(pattern), handler: handler)
        if let key = Key(route.pattern.segments) {
            indexed[key, default: []].append(routes.count)
        } else {
            unindexed.append(routes.count)
        }
        routes.append(route)
    }

    /// The routes that may match `segments`, in the order they were added.
    private func candidates(_ segments: [String]) -> [Int] {
        guard let matching = indexed[Key(count: segments.count, segments)] else { return unindexed }
        guard !unindexed.isEmpty else { return matching }
        return (matching + unindexed).sorted()
    }

    /// Every registered (method, pattern) pair, in registration order.
    public var registeredRoutes: [(method: HTTPMethod, pattern: String)] {
        routes.map { ($0.method, $0.pattern.description) }
    }

    /// The outcome of routing one request.
    enum Resolution {
        /// The route matched (its handler and pattern), with the path's parameters.
        case handler(Route, PathParameters)
        case options(allow: String, fields: [(name: String, value: String)] = [])
    }

    /// Finds the handler for a request.
    /// - Throws: ``HTTPError`` 400 (undecodable path), 404 or 405.
    func resolve(method: HTTPMethod, path: String) throws(HTTPError) -> Resolution {
        if method == .OPTIONS, path == "*" {
            return .options(allow: HTTPMethod.allCases.map(\.rawValue).joined(separator: ", "))
        }
        let segments = try Self.decodedSegments(path)
        var allowed: [HTTPMethod] = []
        var headFallback: (Route, PathParameters)?
        var optionsFields: [(name: String, value: String)] = []
        for index in candidates(segments) {
            let route = routes[index]
            guard let parameters = route.pattern.match(segments) else { continue }
            if route.method == method { return .handler(route, parameters) }
            for field in route.handler.optionsFields where !optionsFields.contains(where: { $0.name == field.name }) { optionsFields.append(field) }
            if method == .HEAD, route.method == .GET, headFallback == nil { headFallback = (route, parameters) }
            if !allowed.contains(route.method) { allowed.append(route.method) }
        }
        if let (route, parameters) = headFallback { return .handler(route, parameters) }
        guard !allowed.isEmpty else {
            throw HTTPError(.notFound, code: "notFound", detail: "No resource exists at this path.")
        }
        if allowed.contains(.GET), !allowed.contains(.HEAD) { allowed.append(.HEAD) }
        allowed.append(.OPTIONS)
        let allow = HTTPMethod.allCases.filter(allowed.contains).map(\.rawValue).joined(separator: ", ")
        if method == .OPTIONS { return .options(allow: allow, fields: optionsFields) }
        throw HTTPError(
            .methodNotAllowed, code: "methodNotAllowed",
            detail: "\(method) is not supported here; allowed: \(allow).", headers: ["Allow": allow])
    }

    static func decodedSegments(_ path: String) throws(HTTPError) -> [String] {
        // Strict matching: "/games/" and "/v1//games" are not "/games" and "/v1/games".
        guard path.utf8.first == UInt8(ascii: "/") else { return [path] }
        if path == "/" { return [] }
        var path = path
        let segments: [String]? = path.withUTF8 { bytes in
            var segments: [String] = []
            segments.reserveCapacity(4)
            for raw in PercentDecoding.split(UnsafeBufferPointer(rebasing: bytes[1...]), on: UInt8(ascii: "/")) {
                guard let segment = PercentDecoding.decode(UnsafeBufferPointer(rebasing: raw), plusAsSpace: false) else { return nil }
                segments.append(segment)
            }
            return segments
        }
        guard let segments else { throw HTTPError(.badRequest, code: "invalidPath", detail: "The path does not decode to UTF-8.") }
        return segments
    }
}
