/// Cross-origin resource sharing for browser apps on other origins (the Fetch standard's
/// CORS protocol). Only exact origins are allowed; credentials travel in `Authorization`,
/// never in cookies, so `Access-Control-Allow-Credentials` is never sent.
public struct CORSPolicy: Sendable {
    /// The origins allowed, exactly as browsers send them (`https://app.example.com`).
    public var allowedOrigins: Set<String>
    /// The request fields a preflight allows, besides the CORS-safelisted ones.
    public var allowedHeaders: [String]
    /// The response fields scripts may read, besides the CORS-safelisted ones.
    public var exposedHeaders: [String]
    /// How long a browser may keep a preflight's answer, in seconds.
    public var maxAge: Int

    /// A policy for `allowedOrigins`.
    public init(allowedOrigins: Set<String>, allowedHeaders: [String], exposedHeaders: [String], maxAge: Int = 600) {
        self.allowedOrigins = allowedOrigins
        self.allowedHeaders = allowedHeaders
        self.exposedHeaders = exposedHeaders
        self.maxAge = maxAge
    }

    /// Whether `origin` has the form of an origin: `http` or `https`, a host, an
    /// optional port, nothing after (no path, no trailing slash).
    public static func isOrigin(_ origin: String) -> Bool {
        let parts = origin.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0] == "http" || parts[0] == "https", !parts[1].isEmpty else { return false }
        return parts[1].utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
        }
    }

    /// The fields an answer to a request from `origin` carries: `Vary: Origin` always
    /// (the answer depends on it), and for an allowed origin the origin and the
    /// exposed fields.
    func fields(origin: String?) -> [(name: String, value: String)] {
        guard let origin, allowedOrigins.contains(origin) else { return [("Vary", "Origin")] }
        return [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Expose-Headers", exposedHeaders.joined(separator: ", ")),
            ("Vary", "Origin"),
        ]
    }

    /// The fields of a preflight's answer (`OPTIONS` with `Access-Control-Request-Method`)
    /// from `origin` to a path that allows `methods`; only `Vary` for an origin not allowed.
    func preflightFields(origin: String?, methods: String) -> [(name: String, value: String)] {
        guard let origin, allowedOrigins.contains(origin) else { return [("Vary", "Origin")] }
        return [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Methods", methods),
            ("Access-Control-Allow-Headers", allowedHeaders.joined(separator: ", ")),
            ("Access-Control-Max-Age", String(maxAge)), ("Vary", "Origin"),
        ]
    }
}
