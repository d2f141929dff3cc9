import CatalogModels
import Foundation
import GRDB

/// `locations`: named places, filterable by bounding box and by distance from a point.
enum LocationTable: ResourceTable {
    static let table = "locations"
    static let dataColumns = ["name", "country_code", "latitude", "longitude"]
    static let sortColumns = ["createdAt": "created_at", "name": "name"]
    static let search: (table: String, weights: String)? = nil
    static let renderer = RowRenderer([
        RenderedField("id", "id", .text), RenderedField("name", "name", .text), RenderedField("countryCode", "country_code", .text),
        RenderedField("latitude", "latitude", .real), RenderedField("longitude", "longitude", .real),
        RenderedField("distanceMeters", Geo.distanceColumn, .real), RenderedField("createdAt", "created_at", .timestamp),
        RenderedField("updatedAt", "updated_at", .timestamp), RenderedField("version", "version", .integer),
    ])

    static func values(_ input: LocationInput) -> [(any DatabaseValueConvertible)?] {
        [input.name, input.countryCode, input.latitude, input.longitude]
    }

    static func model(_ row: Row) -> Location {
        let meta = meta(row)
        var location = Location(id: meta.id, name: row["name"], countryCode: row["country_code"],
                                latitude: row["latitude"], longitude: row["longitude"],
                                createdAt: meta.createdAt, updatedAt: meta.updatedAt, version: meta.version)
        // Present only in lists ordered by distance from a point.
        if row.hasColumn(Geo.distanceColumn) { location.distanceMeters = row[Geo.distanceColumn] }
        return location
    }
}
