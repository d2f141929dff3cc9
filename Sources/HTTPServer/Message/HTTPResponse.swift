/// A response a handler returns. The server adds `Content-Length`, `Date` and `Connection`.
public struct HTTPResponse: Sendable {
    /// The status code and reason phrase.
    public var status: HTTPStatus
    /// Header fields in the order they are written. Do not set `Content-Length`, `Date`
    /// or `Connection`: the server owns those.
    public var headers: [(name: String, value: String)]
    /// The body bytes. The server omits them for `HEAD`, 204 and 304 but keeps the length.
    public var body: [UInt8]
    /// Whether the server closes the connection after this response (`Connection: close`),
    /// so a client that floods one connection is answered once, not once per request.
    public var closesConnection = false
    /// A body sent while it is produced (see ``ResponseStream``), after the head, in
    /// place of ``body``. Not for `HEAD`: the stream is then ended at once.
    public var stream: ResponseStream?
    /// A file (or part of one) sent as the body, in place of ``body``: from the kernel's
    /// page cache straight to the socket (`sendfile`), or through TLS a bounded piece at
    /// a time; `Content-Length` is its ``ResponseFile/count``.
    public var file: ResponseFile?
    /// The `Cache-Control` field, written after ``headers`` when set (a field of its own,
    /// so that stating how a response may be cached does not grow its headers).
    public var cacheControl: String?

    /// Creates a response.
    public init(status: HTTPStatus = .ok, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array(text.utf8))
    }
}
