import CatalogModels
import CatalogStore
import Foundation
import HTTPServer

/// The one place where errors become responses: every error, from the HTTP parser to
/// the store, is rendered as an RFC 9457 `application/problem+json` document.
enum ErrorMapping {
    private static let encoder = CatalogJSON.makeEncoder()

    static func render(_ error: any Error, context: ErrorContext) -> HTTPResponse {
        if let decorated = error as? ErrorWithHeaders { return render(decorated.error, context: context).adding(decorated.headers) }
        let failure = apiError(for: error)
        let problem = Problem(title: failure.status.reasonPhrase, status: failure.status.code, detail: failure.detail,
                              instance: context.path, code: failure.code, errors: failure.errors, requestId: context.requestID)
        let body = (try? encoder.encode(problem)).map(Array.init) ?? Array(#"{"title":"Internal Server Error","status":500}"#.utf8)
        return HTTPResponse(status: failure.status, headers: [("Content-Type", ProblemDocument.contentType)] + failure.headers, body: body)
    }

    static func apiError(for error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as HTTPError:
            return APIError(status: error.status, code: error.code, detail: error.detail,
                            headers: error.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        case let error as StoreError:
            switch error {
            case .notFound:
                return .notFound
            case let .invalid(errors):
                return .validation(errors)
            case let .preconditionFailed(current):
                return APIError(status: .preconditionFailed, code: "preconditionFailed",
                                detail: "A precondition failed against the current version (\(current)); fetch the resource again and retry.",
                                headers: [("ETag", ETag.header(current))])
            case let .invalidCursor(detail):
                return .invalidParameter("cursor", detail)
            case let .conflict(detail):
                return APIError(status: .conflict, code: "conflict", detail: detail)
            case let .quotaExceeded(detail):
                return APIError(status: .conflict, code: "quotaExceeded", detail: detail)
            case let .unavailable(detail):
                return APIError(status: .serviceUnavailable, code: "unavailable", detail: detail, headers: [("Retry-After", "1")])
            case .tooExpensive:
                return APIError(status: .serviceUnavailable, code: "tooExpensive",
                                detail: "The query needs more work than one request may take; narrow it (longer search words, a smaller radius or box).",
                                headers: [("Retry-After", "5")])
            }
        default:
            return APIError(status: .internalServerError, code: "internalError", detail: "The server failed to process the request.")
        }
    }
}
