import Foundation
import GRDB

/// Geographic SQL for locations: great-circle distance and spatial-index filters.
enum Geo {
    /// The mean Earth radius (IUGG), in meters.
    static let earthRadius = 6_371_008.8

    /// Haversine distance in meters from `t.latitude, t.longitude` to a point bound as
    /// (latitude, latitude, longitude).
    static let distanceSQL = """
        (\(earthRadius) * 2 * asin(sqrt(min(1.0, \
        pow(sin(radians(t.latitude - ?) / 2), 2) + \
        cos(radians(?)) * cos(radians(t.latitude)) * pow(sin(radians(t.longitude - ?) / 2), 2)))))
        """

    /// Single-precision R*Tree boxes can round a point outward by ~1e-5°: pad, then filter exactly.
    private static let padding = 0.0001

    /// A WHERE clause (with its arguments) selecting the locations in `area`; for a
    /// circle it is the circle's bounding box, and the caller filters by distance.
    static func filter(_ area: ListRequest.Area) -> (String, [(any DatabaseValueConvertible)?]) {
        switch area {
        case let .boundingBox(minLongitude, minLatitude, maxLongitude, maxLatitude):
            let crosses = minLongitude > maxLongitude
            let (indexFilter, indexArguments) = rtree(minLatitude: minLatitude, maxLatitude: maxLatitude,
                                                      minLongitude: minLongitude, maxLongitude: maxLongitude)
            let exactLongitude = crosses ? "(t.longitude >= ? OR t.longitude <= ?)" : "t.longitude BETWEEN ? AND ?"
            return ("\(indexFilter) AND t.latitude BETWEEN ? AND ? AND \(exactLongitude)",
                    indexArguments + [minLatitude, maxLatitude, minLongitude, maxLongitude])
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
            return rtree(minLatitude: max(-90, minLatitude), maxLatitude: min(90, maxLatitude),
                         minLongitude: minLongitude, maxLongitude: maxLongitude)
        }
    }

    private static func rtree(minLatitude: Double, maxLatitude: Double, minLongitude: Double, maxLongitude: Double)
        -> (String, [(any DatabaseValueConvertible)?]) {
        let longitude = minLongitude > maxLongitude ? "(max_lon >= ? OR min_lon <= ?)" : "max_lon >= ? AND min_lon <= ?"
        return ("t.pk IN (SELECT pk FROM locations_rtree WHERE max_lat >= ? AND min_lat <= ? AND \(longitude))",
                [minLatitude - padding, maxLatitude + padding, minLongitude - padding, maxLongitude + padding])
    }
}
