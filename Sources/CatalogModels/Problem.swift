/// An RFC 9457 problem document, the body of every error response
/// (`application/problem+json`).
public struct Problem: Codable, Sendable, Hashable, Error {
    /// A URI reference identifying the problem type (`about:blank` when the status says it all).
    public var type: String
    /// A short summary of the problem type.
    public var title: String
    /// The HTTP status code.
    public var status: Int
    /// An explanation of this occurrence.
    public var detail: String?
    /// The request path this occurrence concerns.
    public var instance: String?
    /// A stable machine-readable code, such as `validationFailed` or `notFound`.
    public var code: String?
    /// One entry per failing field, on 422 responses: at most ``maxListedErrors``.
    public var errors: [FieldError]?
    /// How many failing fields were found beyond those listed in ``errors``, when any were.
    public var moreErrors: Int?
    /// The request's id (also in the `X-Request-Id` header), to quote when reporting it.
    public var requestId: String?

    /// Creates a problem.
    public init(
        type: String = "about:blank", title: String, status: Int, detail: String? = nil,
        instance: String? = nil, code: String? = nil, errors: [FieldError]? = nil, moreErrors: Int? = nil,
        requestId: String? = nil
    ) {
        self.requestId = requestId
        self.moreErrors = moreErrors
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.instance = instance
        self.code = code
        self.errors = errors
    }

    /// The most failing fields a problem lists; it counts the rest in ``moreErrors``.
    public static let maxListedErrors = 50
}
