import CatalogModels
import Foundation
import HTTPServer

/// The wire format of JSON responses.
enum JSONResponse {
    static let contentType = "application/json"

    static let encoder = CatalogJSON.makeEncoder()
}
