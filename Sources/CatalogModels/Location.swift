import Foundation

/// A named place on Earth.
public struct Location: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier.
    public var id: CatalogID
    /// The place's name (1…200 characters).
    public var name: String
    /// ISO 3166-1 alpha-2 country code, such as `FR`.
    public var countryCode: String
    /// Degrees north, −90…90 (WGS 84).
    public var latitude: Double
    /// Degrees east, −180…180 (WGS 84).
    public var longitude: Double
    /// Great-circle distance from the `near` point of a list request, in meters;
    /// present only in such results.
    public var distanceMeters: Double?
    /// When the location was created.
    public var createdAt: Date
    /// When the location last changed.
    public var updatedAt: Date
    /// Increases by one on every change; the `ETag` is this number in quotes.
    public var version: Int

    /// Creates a location value.
    public init(
        id: CatalogID, name: String, countryCode: String, latitude: Double, longitude: Double,
        distanceMeters: Double? = nil, createdAt: Date, updatedAt: Date, version: Int
    ) {
        self.id = id
        self.name = name
        self.countryCode = countryCode
        self.latitude = latitude
        self.longitude = longitude
        self.distanceMeters = distanceMeters
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }
}

/// The body of `POST /v1/locations` and `PUT /v1/locations/{id}`.
public struct LocationInput: Codable, Sendable, Hashable, Validatable {
    /// 1…200 characters.
    public var name: String
    /// Two upper-case letters.
    public var countryCode: String
    /// −90…90.
    public var latitude: Double
    /// −180…180.
    public var longitude: Double

    /// The allowed name length.
    public static let nameLength = 1...200
    /// The allowed latitudes.
    public static let latitudeRange = -90.0...90.0
    /// The allowed longitudes.
    public static let longitudeRange = -180.0...180.0
    /// The rule `name` keeps.
    public static let nameRule = FieldRule<String>.text(length: nameLength)
    /// The rule `countryCode` keeps.
    public static let countryCodeRule = FieldRule<String>.countryCode
    /// The rule `latitude` keeps.
    public static let latitudeRule = FieldRule<Double>.number(in: latitudeRange)
    /// The rule `longitude` keeps.
    public static let longitudeRule = FieldRule<Double>.number(in: longitudeRange)

    /// Creates an input value.
    public init(name: String, countryCode: String, latitude: Double, longitude: Double) {
        self.name = name
        self.countryCode = countryCode
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(name, Self.nameRule, at: "/name")
        errors.check(countryCode, Self.countryCodeRule, at: "/countryCode")
        errors.check(latitude, Self.latitudeRule, at: "/latitude")
        errors.check(longitude, Self.longitudeRule, at: "/longitude")
        return errors
    }
}

extension LocationInput {
    /// The input that recreates `location` (for editing it).
    public init(_ location: Location) {
        self.init(name: location.name, countryCode: location.countryCode, latitude: location.latitude, longitude: location.longitude)
    }
}
