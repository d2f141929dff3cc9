import CatalogMedia
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer

/// The one place where errors become responses: every error, from the HTTP parser to
/// the store, is rendered as an RFC 9457 `application/problem+json` document.
enum ErrorMapping {
    static func render(_ error: any Error, context: ErrorContext) -> HTTPResponse {
        if let decorated = error as? ErrorWithHeaders { return render(decorated.error, context: context).adding(decorated.headers) }
        let failure = apiError(for: error)
        let problem = Problem(
            title: failure.status.reasonPhrase, status: failure.status.code, detail: failure.detail,
            instance: context.path, code: failure.code, errors: failure.errors, moreErrors: failure.moreErrors,
            requestId: context.requestID)
        // A refusal is about this request: never stored, never served to another.
        var response = HTTPResponse(status: failure.status, headers: [("Content-Type", ProblemDocument.contentType)] + failure.headers, body: json(problem))
        response.cacheControl = "no-store"
        response.closesConnection = failure.closesConnection
        return response
    }

    /// `problem` as JSON with sorted keys, as `CatalogJSON`'s encoder writes it, without
    /// an encoder: problems answer floods (429s, 503s), so they must cost little.
    static func json(_ problem: Problem) -> [UInt8] {
        var json = "{"
        var separator = ""
        func name(_ name: String) {
            json += separator + "\"" + name + "\":"
            separator = ","
        }
        func member(_ key: String, _ value: String?) {
            guard let value else { return }
            name(key)
            ProblemDocument.appendQuoted(value, to: &json)
        }
        member("code", problem.code)
        member("detail", problem.detail)
        if let errors = problem.errors {
            name("errors")
            json += "["
            for (index, error) in errors.enumerated() {
                json += index == 0 ? "{\"code\":" : ",{\"code\":"
                ProblemDocument.appendQuoted(error.code, to: &json)
                json += ",\"message\":"
                ProblemDocument.appendQuoted(error.message, to: &json)
                json += ",\"pointer\":"
                ProblemDocument.appendQuoted(error.pointer, to: &json)
                json += "}"
            }
            json += "]"
        }
        member("instance", problem.instance)
        if let more = problem.moreErrors {
            name("moreErrors")
            json += String(more)
        }
        member("requestId", problem.requestId)
        name("status")
        json += String(problem.status)
        member("title", problem.title)
        member("type", problem.type)
        return Array((json + "}").utf8)
    }

    static func apiError(for error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as HTTPError:
            return APIError(
                status: error.status, code: error.code, detail: error.detail,
                headers: error.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        case let error as StoreError:
            switch error {
            case .notFound:
                return .notFound
            case let .invalid(errors):
                return .validation(errors)
            case let .preconditionFailed(current):
                return APIError(
                    status: .preconditionFailed, code: "preconditionFailed",
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
            case let .syncTokenExpired(detail):
                return APIError(status: HTTPStatus(code: 410), code: "syncTokenExpired", detail: detail)
            case .tooExpensive:
                return APIError(
                    status: .serviceUnavailable, code: "tooExpensive",
                    detail: "The query needs more work than one request may take; narrow it (longer search words, a smaller radius or box).",
                    headers: [("Retry-After", "5")])
            }
        case let error as ImageRefusal:
            return imageError(error)
        case is MediaStoreError:
            return APIError(
                status: .serviceUnavailable, code: "mediaStoreUnavailable", detail: "The media store did not answer as it should; retry shortly.",
                headers: [("Retry-After", "5")])
        default:
            return APIError(status: .internalServerError, code: "internalError", detail: "The server failed to process the request.")
        }
    }

    /// Why an upload was refused: each the client's to fix.
    private static func imageError(_ refusal: ImageRefusal) -> APIError {
        let accepted = "a JPEG, PNG, WebP, HEIC or AVIF image"
        switch refusal {
        case let .tooLarge(bytes):
            return APIError(
                status: .contentTooLarge, code: "contentTooLarge", detail: "The image has \(bytes) bytes; at most \(ImageRules.maxBytes) are accepted.")
        case .unsupported:
            return APIError(
                status: .unsupportedMediaType, code: "unsupportedImage", detail: "The body is not \(accepted) (told from its bytes, not its Content-Type).")
        case let .mismatched(declared, actual):
            return APIError(
                status: .unsupportedMediaType, code: "contentTypeMismatch",
                detail: "The body is \(actual.contentType), not \(declared.contentType) as its Content-Type says.")
        case let .tooManyPixels(width, height):
            return APIError(
                status: .unprocessableContent, code: "imageTooLarge",
                detail:
                    "The image is \(width) × \(height) pixels; at most \(ImageRules.maxPixels / 1_000_000) megapixels, \(ImageRules.maxSide) pixels a side "
                    + "and \(ImageRules.maxDecodedBytes / 1_000_000) MB decoded are accepted.")
        case let .tooLargeOnceKept(bytes):
            return APIError(
                status: .unprocessableContent, code: "imageTooLarge",
                detail: "Kept upright, in sRGB and without metadata, the image takes \(bytes) bytes; at most \(ImageRules.maxBytes) are kept.")
        case .undecodable:
            return APIError(status: .unprocessableContent, code: "imageUndecodable", detail: "The image is truncated or corrupt: it cannot be decoded.")
        }
    }
}
