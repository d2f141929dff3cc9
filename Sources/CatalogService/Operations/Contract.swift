import Foundation
import HTTPServer

/// `GET /openapi.yaml`: the API contract, read once at startup.
struct Contract: Sendable {
    private let bytes: [UInt8]?
    private let path: String

    init(document: URL) {
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
