import Foundation
import HTTPServer

/// `GET /openapi.yaml`: the API contract, read once at startup.
struct Contract: Sendable {
    private let bytes: [UInt8]?
    private let path: String

    /// The document at `document`, or the one the build carries when `nil`.
    init(document: URL?) {
        guard let document else {
            path = "the embedded document"
            bytes = Array(EmbeddedContract.document.utf8)
            return
        }
        path = document.path
        bytes = (try? Data(contentsOf: document)).map(Array.init)
    }

    func response() throws -> HTTPResponse {
        guard let bytes else {
            throw APIError(status: .notFound, code: "notFound", detail: "The OpenAPI document is not installed (looked for \(path)).")
        }
        return HTTPResponse(status: .ok, headers: [("Content-Type", "application/yaml")], body: bytes)
    }
}
