import Foundation
import HTTPServer

/// `GET /openapi.yaml`: the API contract, read once at startup.
struct Contract: Sendable {
    private let bytes: [UInt8]?
    private let path: String
    /// The document's tag, a digest made once (not per request: the route is open).
    private let tag: String

    /// The document at `document`, or the one the build carries when `nil`.
    init(document: URL?) {
        if let document {
            path = document.path
            bytes = (try? Data(contentsOf: document)).map(Array.init)
        } else {
            path = "the embedded document"
            bytes = Array(EmbeddedContract.document.utf8)
        }
        tag = ETag.header(0, body: bytes ?? [])
    }

    func response() throws -> HTTPResponse {
        guard let bytes else {
            throw APIError(status: .notFound, code: "notFound", detail: "The OpenAPI document is not installed (looked for \(path)).")
        }
        return HTTPResponse(status: .ok, headers: [("Content-Type", "application/yaml"), ("ETag", tag)], body: bytes)
    }
}
