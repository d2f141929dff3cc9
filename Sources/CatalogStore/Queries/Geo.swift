import Foundation

/// Geographic SQL for locations: great-circle distance and spatial-index filters.
enum Geo {
    /// The mean Earth radius (IUGG), in meters.
    static let earthRadius = 6_371_008.8

    /// Haversine distance in meters from `t.latitude, t.longitude` to a point bound as
    /// (latitude, latitude, longitude).
    static func distanceSQL(_ dialect: any SQLDialect) -> String {
        """
        (\(earthRadius) * 2 * asin(sqrt(\(dialect.least)(1.0, \
        pow(sin(radians(t.latitude - ?) / 2), 2) + \
        cos(radians(?)) * cos(radians(t.latitude)) * pow(sin(radians(t.longitude - ?) / 2), 2)))))
        """
    }

    /// Single-precision R*Tree boxes can round a point outward by ~1e-5°: pad, then filter exactly.
    private static let padding = 0.0001

    /// A WHERE clause (with its arguments) selecting the locations in `area`; for a
    /// circle it is the circle's bounding box, and the caller filters by distance.
    static func filter(_ area: ListRequest.Area, _ dialect: any SQLDialect) -> (String, SQLArguments) {
        switch area {
        case let .boundingBox(minLongitude, minLatitude, maxLongitude, maxLatitude):
            let crosses = minLongitude > maxLongitude
            let (indexFilter, indexArguments) = index(
                dialect, minLatitude: minLatitude, maxLatitude: maxLatitude,
                minLongitude: minLongitude, maxLongitude: maxLongitude)
            let exactLongitude = crosses ? "(t.longitude >= ? OR t.longitude <= ?)" : "t.longitude BETWEEN ? AND ?"
            return (
                "\(indexFilter) AND t.latitude BETWEEN ? AND ? AND \(exactLongitude)",
                indexArguments + [minLatitude, maxLatitude, minLongitude, maxLongitude]
            )
        case let .near(latitude, longitude, radius):
            let angular = radius / earthRadius
            let deltaLatitude = angular * 180 / .pi
            let minLatitude = latitude - deltaLatitude, maxLatitude = latitude + deltaLatitude
            var minLongitude = -180.0, maxLongitude = 180.0
            if minLatitude > -90, maxLatitude < 90, angular < .pi / 2 {
                let ratio = sin(angular) / cos(latitude * .pi / 180)
                if ratio < 1 {
                    let deltaLongitude = asin(ratio) * 180 / .pi
                    minLongitude = longitude - deltaLongitude
                    maxLongitude = longitude + deltaLongitude
                    if minLongitude < -180 { minLongitude += 360 }
                    if maxLongitude > 180 { maxLongitude -= 360 }
                }
            }
            return index(
                dialect, minLatitude: max(-90, minLatitude), maxLatitude: min(90, maxLatitude),
                minLongitude: minLongitude, maxLongitude: maxLongitude)
        }
    }

    /// The filter the spatial index answers: SQLite's R*Tree of the locations, or
    /// PostgreSQL's GiST index on `point(longitude, latitude)` (two boxes when the box
    /// crosses the antimeridian).
    private static func index(
        _ dialect: any SQLDialect, minLatitude: Double, maxLatitude: Double, minLongitude: Double, maxLongitude: Double
    )
        -> (String, SQLArguments)
    {
        if case .pointGiST = dialect.spatialIndex {
            let box = "point(t.longitude, t.latitude) <@ box(point(?, ?), point(?, ?))"
            guard minLongitude > maxLongitude else { return (box, [minLongitude, minLatitude, maxLongitude, maxLatitude]) }
            return ("(\(box) OR \(box))", [minLongitude, minLatitude, 180.0, maxLatitude, -180.0, minLatitude, maxLongitude, maxLatitude])
        }
        let longitude = minLongitude > maxLongitude ? "(max_lon >= ? OR min_lon <= ?)" : "max_lon >= ? AND min_lon <= ?"
        return (
            "t.pk IN (SELECT pk FROM locations_rtree WHERE max_lat >= ? AND min_lat <= ? AND \(longitude))",
            [minLatitude - padding, maxLatitude + padding, minLongitude - padding, maxLongitude + padding]
        )
    }
}
