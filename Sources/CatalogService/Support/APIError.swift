import CatalogModels
import CatalogSchema
import HTTPServer

/// A client mistake found by the catalog's handlers, as a typed value. Rendered, with
/// every other error, by ``ErrorMapping``.
struct APIError: Error, Sendable {
    var status: HTTPStatus
    var code: String
    var detail: String
    var errors: [FieldError]?
    var headers: [(name: String, value: String)] = []
    /// Whether the connection closes after this answer.
    var closesConnection = false

    static func invalidParameter(_ name: String, _ detail: String) -> APIError {
        APIError(status: .badRequest, code: "invalidParameter", detail: "Query parameter '\(name)': \(detail)")
    }

    static func invalidID(_ text: String) -> APIError {
        APIError(status: .badRequest, code: "invalidId", detail: "'\(text.prefix(64))' is not a valid id (a UUID such as 4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2).")
    }

    static func invalidHeader(_ name: String, _ detail: String) -> APIError {
        APIError(status: .badRequest, code: "invalidHeader", detail: "Header '\(name)': \(detail)")
    }

    var moreErrors: Int?

    /// 422 listing `errors` (at most ``Problem/maxListedErrors``, counting the rest).
    static func validation(_ errors: [FieldError]) -> APIError {
        validation(FieldErrors(errors))
    }

    /// 422 listing `errors`: the listed ones by pointer in `detail` too, and how many more.
    static func validation(_ errors: FieldErrors) -> APIError {
        let count = errors.listed.count + errors.unlisted
        let fields = errors.listed.map(\.pointer).joined(separator: ", ")
        let more = errors.unlisted > 0 ? " and \(errors.unlisted) more" : ""
        return APIError(
            status: .unprocessableContent, code: "validationFailed",
            detail: "The body has \(count) invalid field\(count == 1 ? "" : "s"): \(fields)\(more).", errors: errors.listed,
            moreErrors: errors.unlisted > 0 ? errors.unlisted : nil)
    }

    static let notFound = APIError(status: .notFound, code: "notFound", detail: "No resource exists with this id.")

    static let endOfPlaylist = APIError(status: .notFound, code: "endOfPlaylist", detail: "The entry is the last of its playlist: nothing plays next.")
}

extension APIError {
    /// The `realm` every challenge names.
    static let realm = "Bearer realm=\"catalog\""

    /// 401: no credential where one is needed.
    static let unauthenticated = APIError(
        status: .unauthorized, code: "unauthenticated",
        detail: "This request needs a credential: send Authorization: Bearer with an API key or identity token.",
        headers: [("WWW-Authenticate", realm)])

    /// 401: the credential sent is not valid (unknown, revoked, expired, malformed or
    /// badly signed); which of these is not said.
    static let invalidToken = APIError(
        status: .unauthorized, code: "invalidToken", detail: "The credential is not valid.",
        headers: [("WWW-Authenticate", realm + ", error=\"invalid_token\"")])

    /// 403: a valid credential without the rights.
    static func forbidden(_ detail: String) -> APIError {
        APIError(status: .forbidden, code: "forbidden", detail: detail, headers: [("WWW-Authenticate", realm + ", error=\"insufficient_scope\"")])
    }
}
