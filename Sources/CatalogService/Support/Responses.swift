import CatalogModels
import Foundation
import HTTPServer

/// The wire format of JSON responses.
enum JSONResponse {
    static let contentType = "application/json"

    static let encoder = CatalogJSON.makeEncoder()

    static let decoder = CatalogJSON.makeDecoder()
}

/// How a handler that answers later hands over its answer.
typealias Completion = @Sendable (Result<HTTPResponse, any Error>) -> Void

extension Handler {
    /// A handler whose work finishes later (a durable write) and answers through the
    /// completion it is given; an error thrown before that is the answer too.
    static func later(_ body: @escaping @Sendable (HTTPRequest, @escaping Completion) throws -> Void) -> Handler {
        .deferred { request, responder in
            let done: Completion = { result in
                switch result {
                case let .success(response): responder.respond(response)
                case let .failure(error): responder.fail(error)
                }
            }
            do { try body(request, done) } catch { responder.fail(error) }
        }
    }
}
