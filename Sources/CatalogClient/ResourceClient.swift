import CatalogModels
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A resource value together with the `ETag` it was served with.
public struct Tagged<Value: Sendable>: Sendable {
    /// The resource.
    public let value: Value
    /// The entity tag (`"3"`), to pass as `ifMatch` when changing it.
    public let etag: String
}

extension Tagged: Equatable where Value: Equatable {}

/// What to list: page size, order, cursor and filters. `nil` members are not sent.
public struct ListQuery: Sendable, Hashable {
    /// Page size, 1…100.
    public var limit: Int?
    /// A sortable field, `-` first for descending (`-createdAt`).
    public var sort: String?
    /// Full-text search terms (playable items and games).
    public var search: String?
    /// Locations within `radius` meters of (`latitude`, `longitude`).
    public var near: (latitude: Double, longitude: Double, radius: Double)?
    /// Locations inside `minLon,minLat,maxLon,maxLat`.
    public var boundingBox: (minLongitude: Double, minLatitude: Double, maxLongitude: Double, maxLatitude: Double)?
    /// The `nextCursor` of the previous page.
    public var cursor: String?
    /// Only these fields of each item (plus `id`); decode such pages into your own type.
    public var fields: [String]?
    /// Playlists only: those holding this playable item.
    public var playableItemId: CatalogID?

    /// Creates a query.
    public init(
        limit: Int? = nil, sort: String? = nil, search: String? = nil, cursor: String? = nil, fields: [String]? = nil,
        playableItemId: CatalogID? = nil
    ) {
        self.limit = limit
        self.sort = sort
        self.search = search
        self.cursor = cursor
        self.fields = fields
        self.playableItemId = playableItemId
    }

    var items: [URLQueryItem] {
        var items: [URLQueryItem] = []
        if let limit { items.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let sort { items.append(URLQueryItem(name: "sort", value: sort)) }
        if let search { items.append(URLQueryItem(name: "q", value: search)) }
        if let near {
            items.append(URLQueryItem(name: "near", value: "\(near.latitude),\(near.longitude)"))
            items.append(URLQueryItem(name: "radius", value: "\(near.radius)"))
        }
        if let box = boundingBox {
            items.append(URLQueryItem(name: "bbox", value: "\(box.minLongitude),\(box.minLatitude),\(box.maxLongitude),\(box.maxLatitude)"))
        }
        if let fields { items.append(URLQueryItem(name: "fields", value: fields.joined(separator: ","))) }
        if let playableItemId { items.append(URLQueryItem(name: "playableItemId", value: playableItemId.rawValue)) }
        if let cursor { items.append(URLQueryItem(name: "cursor", value: cursor)) }
        return items
    }

    /// Queries are equal when they send the same parameters.
    public static func == (lhs: ListQuery, rhs: ListQuery) -> Bool { lhs.items == rhs.items }

    /// Hashes the parameters the query sends.
    public func hash(into hasher: inout Hasher) { hasher.combine(items) }
}

/// An RFC 7396 merge patch: members to set, and optional members to clear with `null`.
public struct MergePatch: Sendable, Encodable {
    private var members: [String: Member] = [:]

    private enum Member: Sendable, Encodable {
        case string(String)
        case number(Double)
        case null
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case let .string(value): try container.encode(value)
            case let .number(value): try container.encode(value)
            case .null: try container.encodeNil()
            }
        }
    }

    /// An empty patch.
    public init() {}

    /// Sets a text member.
    public func set(_ name: String, _ value: String) -> MergePatch { with(name, .string(value)) }
    /// Sets a numeric member.
    public func set(_ name: String, _ value: Double) -> MergePatch { with(name, .number(value)) }
    /// Clears an optional member.
    public func remove(_ name: String) -> MergePatch { with(name, .null) }

    private func with(_ name: String, _ member: Member) -> MergePatch {
        var copy = self
        copy.members[name] = member
        return copy
    }

    /// Encodes the members as one JSON object.
    public func encode(to encoder: any Encoder) throws {
        try members.encode(to: encoder)
    }
}

/// The calls every resource collection supports.
public struct ResourceClient<Model: Codable & Sendable & Hashable & Identifiable, Input: Codable & Sendable>: Sendable where Model.ID == CatalogID {
    let client: CatalogClient
    let path: String

    /// One page.
    public func list(_ query: ListQuery = ListQuery()) async throws(CatalogClientError) -> Page<Model> {
        try await list(query, as: Model.self)
    }

    /// One page decoded as `T`: for `fields`, whose items hold only some members.
    public func list<T: Codable & Sendable & Hashable>(_ query: ListQuery, as type: T.Type) async throws(CatalogClientError) -> Page<T> {
        let (data, _) = try await client.send("GET", path, query: query.items)
        return try client.decode(Page<T>.self, from: data)
    }

    /// Every item, following `nextCursor` page after page as the sequence is iterated.
    public func all(_ query: ListQuery = ListQuery()) -> AsyncThrowingStream<Model, any Error> {
        client.following(query) { try await list($0) }
    }

    /// One resource with its `ETag`; `include` embeds related lists (`comments` and
    /// `playlists` in a playable item, `entries` in a playlist).
    public func get(_ id: CatalogID, include: [String] = []) async throws(CatalogClientError) -> Tagged<Model> {
        try await get(id, include: include, as: Model.self)
    }

    /// One resource decoded as `T`, with only `fields` (plus `id`) when given.
    public func get<T: Decodable & Sendable>(
        _ id: CatalogID, fields: [String]? = nil, include: [String] = [], as type: T.Type
    )
        async throws(CatalogClientError) -> Tagged<T>
    {
        var query: [URLQueryItem] = []
        if let fields { query.append(URLQueryItem(name: "fields", value: fields.joined(separator: ","))) }
        if !include.isEmpty { query.append(URLQueryItem(name: "include", value: include.joined(separator: ","))) }
        return try await client.tagged(client.send("GET", "\(path)/\(id)", query: query))
    }

    /// Creates a resource.
    public func create(_ input: Input) async throws(CatalogClientError) -> Tagged<Model> {
        try await client.tagged(client.send("POST", path, body: client.encode(input), contentType: "application/json"))
    }

    /// Replaces a resource; with `ifMatch`, only if it is still at that version
    /// (``CatalogClientError/preconditionFailed(_:)`` otherwise).
    public func replace(_ id: CatalogID, with input: Input, ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<Model> {
        try await client.tagged(
            client.send(
                "PUT", "\(path)/\(id)", body: client.encode(input), contentType: "application/json",
                headers: client.condition(ifMatch)))
    }

    /// Changes some members; with `ifMatch`, only if the resource is still at that version.
    public func patch(_ id: CatalogID, _ changes: MergePatch, ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<Model> {
        try await client.tagged(
            client.send(
                "PATCH", "\(path)/\(id)", body: client.encode(changes), contentType: "application/merge-patch+json",
                headers: client.condition(ifMatch)))
    }

    /// Deletes a resource; with `ifMatch`, only if it is still at that version.
    public func delete(_ id: CatalogID, ifMatch: String? = nil) async throws(CatalogClientError) {
        _ = try await client.send("DELETE", "\(path)/\(id)", headers: client.condition(ifMatch))
    }
}

extension CatalogClient {
    /// The items of every page from `query` on, following `nextCursor`.
    func following<Item: Sendable>(
        _ query: ListQuery, _ page: @escaping @Sendable (ListQuery) async throws -> Page<Item>
    )
        -> AsyncThrowingStream<Item, any Error>
    {
        AsyncThrowingStream { continuation in
            let task = Task {
                var next: ListQuery? = query
                do {
                    while let current = next {
                        let result = try await page(current)
                        for item in result.items { continuation.yield(item) }
                        next = result.nextCursor.map { cursor in
                            var following = current
                            following.cursor = cursor
                            return following
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    func condition(_ ifMatch: String?) -> [String: String] {
        ifMatch.map { ["If-Match": $0] } ?? [:]
    }

    func encode<T: Encodable>(_ value: T) throws(CatalogClientError) -> Data {
        do {
            return try CatalogJSON.makeEncoder().encode(value)
        } catch {
            throw .invalidResponse("Cannot encode the request: \(error)")
        }
    }

    func tagged<T: Decodable & Sendable>(_ answer: (data: Data, response: HTTPURLResponse)) throws(CatalogClientError) -> Tagged<T> {
        let value = try decode(T.self, from: answer.data)
        return Tagged(value: value, etag: answer.response.value(forHTTPHeaderField: "ETag") ?? "\"\(answer.response.statusCode)\"")
    }
}
