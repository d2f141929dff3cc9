import CatalogModels
import CatalogStore

/// `/v1/locations`: named places, with `near`/`radius` and `bbox` filters.
enum Locations {
    static func endpoints(_ store: CatalogStore, metrics: Metrics) -> ResourceEndpoints<Location, LocationInput> {
        ResourceEndpoints(
            metrics: metrics, path: "/v1/locations", store: store.locations, body: body, geographic: true, readInput: read, inputOf: LocationInput.init)
    }

    static let body = BodyFields(writable: ["name", "countryCode", "latitude", "longitude"])

    static func read(_ object: [String: JSONValue]) throws(APIError) -> LocationInput {
        var reader = FieldReader(object, body)
        let name = reader.string("name", required: true) { Rules.text($0, length: LocationInput.nameLength) }
        let countryCode = reader.string("countryCode", required: true, rule: Rules.countryCode)
        let latitude = reader.number("latitude", required: true) { Rules.number($0, in: LocationInput.latitudeRange) }
        let longitude = reader.number("longitude", required: true) { Rules.number($0, in: LocationInput.longitudeRange) }
        try reader.finish()
        guard let name, let countryCode, let latitude, let longitude else { throw .validation(reader.errors) }
        return LocationInput(name: name, countryCode: countryCode, latitude: latitude, longitude: longitude)
    }
}
