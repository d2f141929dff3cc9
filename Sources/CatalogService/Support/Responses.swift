import CatalogModels
import Foundation
import HTTPServer

/// The wire format of JSON responses.
enum JSONResponse {
    static let contentType = "application/json"

    static let encoder = CatalogJSON.makeEncoder()
}

/// A resource the generic endpoints can serve: it has an id and a version.
protocol CatalogResource: Codable, Sendable, Hashable {
    var id: CatalogID { get }
    var version: Int { get }
}

extension PlayableItem: CatalogResource {}
extension Game: CatalogResource {}
extension Location: CatalogResource {}
