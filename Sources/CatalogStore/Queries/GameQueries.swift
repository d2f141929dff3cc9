import CatalogModels
import Foundation
import GRDB

/// `games`: arcade games, searchable by name and description.
enum GameTable: ResourceTable {
    static let table = "games"
    static let dataColumns = ["name", "description", "image_name"]
    static let sortColumns = ["createdAt": "created_at", "name": "name"]
    static let search: (table: String, weights: String)? = ("games_fts", "10.0, 1.0")
    static let renderer = RowRenderer([
        RenderedField("id", "id", .text), RenderedField("name", "name", .text), RenderedField("description", "description", .text),
        RenderedField("imageName", "image_name", .text), RenderedField("createdAt", "created_at", .timestamp),
        RenderedField("updatedAt", "updated_at", .timestamp), RenderedField("version", "version", .integer),
    ])

    static func values(_ input: GameInput) -> [(any DatabaseValueConvertible)?] {
        [input.name, input.description, input.imageName]
    }

    static func model(_ row: Row) -> Game {
        let meta = meta(row)
        return Game(id: meta.id, name: row["name"], description: row["description"], imageName: row["image_name"],
                    createdAt: meta.createdAt, updatedAt: meta.updatedAt, version: meta.version)
    }
}
