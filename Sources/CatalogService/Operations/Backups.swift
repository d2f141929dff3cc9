import CatalogModels
import CatalogStore
import Foundation
import HTTPServer

/// `POST /admin/backups`: a consistent copy of the live database, written by the server
/// itself through SQLite's online backup API (no second process ever opens the live
/// file), into the backup folder.
struct Backups: Sendable {
    let store: CatalogStore
    let directory: String

    func create() throws -> HTTPResponse {
        let name = "catalog-" + Timestamp.string(from: Date()).replacingOccurrences(of: ":", with: "-") + "-" + String(CatalogID().rawValue.suffix(8)) + ".sqlite"
        let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
        let bytes = try store.backup(to: path)
        let body = try JSONResponse.encoder.encode(Backup(name: name, path: path, bytes: bytes, integrityCheck: "ok"))
        return HTTPResponse(status: .created, headers: [("Content-Type", JSONResponse.contentType)], body: Array(body))
    }
}
