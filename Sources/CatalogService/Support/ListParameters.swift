import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// What a list endpoint accepts besides `limit` and `cursor`.
struct ListOptions: Sendable {
    /// Sortable fields, the first being the default.
    let sortFields: [String]
    /// Whether the default order is descending (newest first).
    var descendingByDefault: Bool
    /// Whether `q` (full-text search) is accepted.
    let searchable: Bool
    /// Whether `near`/`radius` and `bbox` are accepted.
    let geographic: Bool
    /// The fields `fields=…` may name.
    let fields: FieldSet
    /// Filters by a related resource: parameter name → the scope it lists within.
    let filters: [String: @Sendable (CatalogID) -> ListRequest.Scope]
    /// Every query parameter the list accepts.
    let parameters: Set<String>

    init(
        sortFields: [String], descendingByDefault: Bool = false, searchable: Bool, geographic: Bool = false, fields: FieldSet,
        filters: [String: @Sendable (CatalogID) -> ListRequest.Scope] = [:]
    ) {
        self.sortFields = sortFields
        self.descendingByDefault = descendingByDefault
        self.searchable = searchable
        self.geographic = geographic
        self.fields = fields
        self.filters = filters
        parameters = Set(
            ["limit", "cursor", "sort", "fields"] + (searchable ? ["q"] : []) + (geographic ? ["near", "radius", "bbox"] : [])
                + filters.keys)
    }
}

/// Parses and validates list query parameters into a ``ListRequest``. Unknown or
/// repeated parameters and invalid values are 400s naming the parameter.
enum ListParameters {
    static let limitRange = 1...ListRequest.maxLimit
    static let defaultLimit = 20
    static let maxSearchLength = 200
    /// Half the Earth's circumference: every point is within it.
    static let maxRadius = 20_037_509.0

    /// Whether the list `request` asks for costs more than an indexed page: a search or a
    /// geographic filter, which run off the event loops. Names are read as the parser
    /// decodes them, so `%71=` is the search it says.
    @Sendable static func isExpensive(_ request: HTTPRequest) -> Bool {
        var expensive = false
        request.forEachRawQueryPair { pair in expensive = expensive || expensiveNames.contains(where: pair.nameIs) }
        return expensive
    }

    private static let expensiveNames = ["q", "near", "bbox"]

    /// - Parameter scope: the parent the list is within (from its path), if any.
    static func parse(_ request: HTTPRequest, options: ListOptions, scope: ListRequest.Scope? = nil) throws(APIError) -> ListRequest {
        let values = try QueryParameters.parse(request, accepted: options.parameters)
        var list = ListRequest(scope: scope)
        for (name, makeScope) in options.filters {
            guard let text = values[name] else { continue }
            guard let id = CatalogID(text) else { throw .invalidParameter(name, "must be an id (a UUID).") }
            list.scope = makeScope(id)
        }
        if let fields = values["fields"] { list.fields = try options.fields.parse(fields) }
        list.limit = try limit(values)
        list.cursor = try cursor(values)
        if let query = values["q"] {
            // Text without a letter or digit matches nothing (an empty page).
            // Counted in Unicode scalars, as the contract's `maxLength` counts (a letter with
            // combining marks is several).
            guard !query.isEmpty, query.utf8.count <= maxSearchLength * Rules.maxBytesPerCharacter, query.unicodeScalars.count <= maxSearchLength else {
                throw .invalidParameter("q", "must be 1 to \(maxSearchLength) characters.")
            }
            list.search = query
        }
        list.areas = try areas(values)
        list.order = try order(values["sort"], list: list, options: options)
        return list
    }

    /// `limit`: 1…100, 20 when absent.
    static func limit(_ values: QueryValues) throws(APIError) -> Int {
        try integer(values, "limit", in: limitRange) ?? defaultLimit
    }

    /// The parameter `name` as a decimal integer within `range`; `nil` when absent.
    /// - Parameter kind: what the value is, in the message of a 400.
    static func integer(_ values: QueryValues, _ name: String, in range: ClosedRange<Int>, kind: String = "an integer") throws(APIError) -> Int? {
        guard let text = values[name] else { return nil }
        // ASCII digits only: no sign, spaces or other scripts' digits.
        guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let value = Int(text), range.contains(value) else {
            throw .invalidParameter(name, "must be \(kind) from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }

    /// `cursor`: opaque, checked by the store; never empty.
    static func cursor(_ values: QueryValues) throws(APIError) -> String? {
        guard let cursor = values["cursor"] else { return nil }
        guard !cursor.isEmpty else { throw .invalidParameter("cursor", "must not be empty.") }
        return cursor
    }

    private static func order(_ sort: String?, list: ListRequest, options: ListOptions) throws(APIError) -> ListRequest.Order {
        if list.near != nil {
            guard sort == nil else { throw .invalidParameter("sort", "results near a point are ordered by distance; omit sort.") }
            return .distance
        }
        guard let sort else {
            return list.search != nil ? .relevance : .field(options.sortFields[0], descending: options.descendingByDefault)
        }
        let descending = sort.hasPrefix("-")
        let field = descending ? String(sort.dropFirst()) : sort
        guard options.sortFields.contains(field) else {
            let choices = options.sortFields.flatMap { [$0, "-\($0)"] }.joined(separator: ", ")
            throw .invalidParameter("sort", "must be one of \(choices).")
        }
        return .field(field, descending: descending)
    }

    /// `near`/`radius` and `bbox`; when both are given, results must satisfy both.
    private static func areas(_ values: QueryValues) throws(APIError) -> [ListRequest.Area] {
        var areas: [ListRequest.Area] = []
        let near = values["near"], radius = values["radius"], bbox = values["bbox"]
        if let near {
            let point = try numbers(near, count: 2, name: "near", shape: "lat,lon")
            // Without a radius: every location, nearest first.
            let radiusText = radius ?? String(maxRadius)
            guard let meters = Double(radiusText), meters.isFinite, meters > 0, meters <= maxRadius else {
                throw .invalidParameter("radius", "must be a number of meters greater than 0 and at most \(Int(maxRadius)).")
            }
            try checkLatitude(point[0], "near")
            try checkLongitude(point[1], "near")
            areas.append(.near(latitude: point[0], longitude: point[1], radiusMeters: meters))
        } else if radius != nil {
            throw .invalidParameter("radius", "is only allowed with near.")
        }
        if let bbox {
            let box = try numbers(bbox, count: 4, name: "bbox", shape: "minLon,minLat,maxLon,maxLat")
            try checkLongitude(box[0], "bbox")
            try checkLatitude(box[1], "bbox")
            try checkLongitude(box[2], "bbox")
            try checkLatitude(box[3], "bbox")
            areas.append(.boundingBox(minLongitude: box[0], minLatitude: box[1], maxLongitude: box[2], maxLatitude: box[3]))
        }
        return areas
    }

    private static func numbers(_ text: String, count: Int, name: String, shape: String) throws(APIError) -> [Double] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        // Plain decimals only (`-12.5`): no exponent, sign `+`, spaces or hex, as openapi.yaml says.
        let values = parts.filter(isDecimal).compactMap { Double($0) }.filter(\.isFinite)
        guard parts.count == count, values.count == count else { throw .invalidParameter(name, "must be \(shape) (decimal degrees).") }
        return values
    }

    /// `-?[0-9]+(\.[0-9]+)?`.
    private static func isDecimal(_ text: Substring) -> Bool {
        let unsigned = text.hasPrefix("-") ? text.dropFirst() : text
        let pieces = unsigned.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        return pieces.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }

    private static func checkLatitude(_ value: Double, _ name: String) throws(APIError) {
        guard (-90...90).contains(value) else { throw .invalidParameter(name, "latitude must be between -90 and 90.") }
    }

    private static func checkLongitude(_ value: Double, _ name: String) throws(APIError) {
        guard (-180...180).contains(value) else { throw .invalidParameter(name, "longitude must be between -180 and 180.") }
    }

    /// The `Link: <…>; rel="next"` field of the next page: the request's path and its own
    /// parameters, as it sent them, with the new cursor (base64url, so it needs no
    /// escaping) in place of the old one; written in one piece.
    static func nextLink(_ request: HTTPRequest, cursor: String) -> (name: String, value: String) {
        var output: [UInt8] = []
        output.reserveCapacity(request.path.utf8.count + (request.query?.utf8.count ?? 0) + cursor.utf8.count + 24)
        output.append(UInt8(ascii: "<"))
        output += request.path.utf8
        output.append(UInt8(ascii: "?"))
        request.forEachRawQueryPair { pair in
            guard !pair.nameIs("cursor") else { return }
            output += pair.bytes
            output.append(UInt8(ascii: "&"))
        }
        output += "cursor=".utf8
        output += cursor.utf8
        output += #">; rel="next""#.utf8
        return ("Link", String(decoding: output, as: UTF8.self))
    }
}
