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
    public init(id: CatalogID, name: String, countryCode: String, latitude: Double, longitude: Double,
                distanceMeters: Double? = nil, createdAt: Date, updatedAt: Date, version: Int) {
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
        if let violation = Rules.text(name, length: Self.nameLength) { errors.append(violation.at("/name")) }
        if let violation = Rules.countryCode(countryCode) { errors.append(violation.at("/countryCode")) }
        if let violation = Rules.number(latitude, in: Self.latitudeRange) { errors.append(violation.at("/latitude")) }
        if let violation = Rules.number(longitude, in: Self.longitudeRange) { errors.append(violation.at("/longitude")) }
        return errors
    }
}

extension LocationInput {
    /// The input that recreates `location` (for editing it).
    public init(_ location: Location) {
        self.init(name: location.name, countryCode: location.countryCode, latitude: location.latitude, longitude: location.longitude)
    }
}
