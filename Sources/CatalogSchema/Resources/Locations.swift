import CatalogModels

extension ResourceSchema {
    /// Named places: `/v1/locations`, listed by bounding box and by distance from a point
    /// (`near`/`radius`), which fills `distanceMeters`.
    package static let location = ResourceSchema(
        type: "location", noun: "location", path: "/v1/locations", table: "locations",
        fields: [
            .text("name", rule: LocationInput.nameRule, sortable: true),
            .text("countryCode", column: "country_code", rule: LocationInput.countryCodeRule),
            .number("latitude", rule: LocationInput.latitudeRule),
            .number("longitude", rule: LocationInput.longitudeRule),
            .server("distanceMeters", .derived(ResourceSchema.distanceColumn), .number(.number(in: 0...Double.greatestFiniteMagnitude))),
        ],
        geographic: true)

    /// The name a distance-ordered list gives the distance it computes.
    package static let distanceColumn = "distance_meters"
}
