import CatalogModels
import CatalogSchema
import Foundation
import HTTPServer

/// Reads JSON request bodies: media type, syntax, then the document against its declared
/// shape (each field against the shared validation rules), collecting one error per
/// failing field.
enum RequestBody {
    static let json = "application/json"
    static let mergePatch = "application/merge-patch+json"

    /// The body as a JSON object, after checking its media type is `mediaType`.
    static func object(_ request: HTTPRequest, mediaType: String) throws(APIError) -> [String: JSONValue] {
        try checkMediaType(request, mediaType)
        guard !request.body.isEmpty else {
            throw APIError(status: .badRequest, code: "bodyRequired", detail: "The request needs a JSON object body.")
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(request.body)
        } catch {
            throw APIError(status: .badRequest, code: "malformedJSON", detail: "The body is not valid JSON: \(error.reason) at byte \(error.offset).")
        }
        guard case let .object(object) = value else {
            throw APIError(status: .badRequest, code: "malformedJSON", detail: "The body must be a JSON object, not \(value.typeName).")
        }
        return object
    }

    /// The body's values as a document of `shape`; 422 listing every failing field.
    static func values(_ request: HTTPRequest, _ shape: DocumentShape, mediaType: String) throws(APIError) -> FieldValues {
        try read(object(request, mediaType: mediaType), shape)
    }

    /// `object` read as a document of `shape`; 422 listing every failing field.
    static func read(_ object: [String: JSONValue], _ shape: DocumentShape) throws(APIError) -> FieldValues {
        let (values, errors) = shape.read(object)
        guard errors.isEmpty else { throw .validation(errors) }
        return values
    }

    private static func checkMediaType(_ request: HTTPRequest, _ expected: String) throws(APIError) {
        let header = request.headers["Content-Type"] ?? ""
        if header == expected { return }
        let parts = header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let charsetOK = parts.dropFirst().allSatisfy { parameter in
            !parameter.hasPrefix("charset=") || ["charset=utf-8", "charset=\"utf-8\""].contains(parameter)
        }
        guard parts.first == expected, charsetOK else {
            var failure = APIError(
                status: .unsupportedMediaType, code: "unsupportedMediaType",
                detail: "The body must be sent as \(expected)\(header.isEmpty ? "" : ", not \(header)").")
            failure.headers = expected == mergePatch ? [("Accept-Patch", mergePatch)] : []
            throw failure
        }
    }
}
