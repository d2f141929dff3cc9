/// How the body of a request is delimited.
enum BodyFraming: Equatable {
    case none
    case length(Int)
    case chunked
}

/// A complete, validated request head.
struct RequestHead {
    /// The method, or `nil` for a valid token the server does not implement (the router
    /// then answers 405 on a known path, 501 elsewhere).
    var method: HTTPMethod?
    /// The method as sent (for logs), also when it is not implemented.
    var methodToken: String
    var version: HTTPVersion
    var path: String
    var query: String?
    var headers: HTTPHeaders
    var framing: BodyFraming
    /// Whether the connection may stay open after this exchange (HTTP/1.0 and 1.1 rules, `Connection`).
    var keepAlive: Bool
    /// Whether the client waits for `100 Continue` before sending the body.
    var expectsContinue: Bool
}
