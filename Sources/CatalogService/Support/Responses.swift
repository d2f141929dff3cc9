import CatalogModels
import Foundation
import HTTPServer

/// JSON responses in the wire format.
enum JSONResponse {
    static let contentType = "application/json"

    static let encoder = CatalogJSON.makeEncoder()

    static func make<Value: Encodable>(_ value: Value, status: HTTPStatus = .ok, headers: [(name: String, value: String)] = []) throws -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", contentType)] + headers, body: Array(try encoder.encode(value)))
    }
}

/// A resource the generic endpoints can serve: it has an id and a version.
protocol CatalogResource: Codable, Sendable, Hashable {
    var id: CatalogID { get }
    var version: Int { get }
}

extension PlayableItem: CatalogResource {}
extension Game: CatalogResource {}
extension Location: CatalogResource {}
