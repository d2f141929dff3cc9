import Foundation

/// One resource of a catalog export, with its id, times and version: a line of
/// `catalog export` (NDJSON, `{"type":"game","data":{…}}`) and an element of
/// `POST /admin/import`. Exports list items before the playlists and comments that
/// refer to them, and comments before their replies, which is the order imports need.
public enum CatalogRecord: Codable, Sendable, Hashable {
    case game(Game)
    case location(Location)
    case playableItem(PlayableItem)
    case playlist(PlaylistRecord)
    case comment(Comment)

    /// The image the record's resource shows, if any.
    public var image: ImageReference? {
        switch self {
        case let .game(game): game.image
        case let .playableItem(item): item.image
        case let .playlist(playlist): playlist.image
        case .location, .comment: nil
        }
    }

    /// The `type` member of each kind, in the order an export writes them.
    public static let types = ["game", "location", "playableItem", "playlist", "comment"]

    private enum CodingKeys: String, CodingKey { case type, data }

    /// Decodes `{"type": …, "data": …}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .type) {
        case "game": self = .game(try container.decode(Game.self, forKey: .data))
        case "location": self = .location(try container.decode(Location.self, forKey: .data))
        case "playableItem": self = .playableItem(try container.decode(PlayableItem.self, forKey: .data))
        case "playlist": self = .playlist(try container.decode(PlaylistRecord.self, forKey: .data))
        case "comment": self = .comment(try container.decode(Comment.self, forKey: .data))
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container,
                debugDescription: "'\(other)' is not one of \(Self.types.joined(separator: ", ")).")
        }
    }

    /// Encodes `{"type": …, "data": …}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case let .game(game): try container.encode("game", forKey: .type); try container.encode(game, forKey: .data)
        case let .location(location): try container.encode("location", forKey: .type); try container.encode(location, forKey: .data)
        case let .playableItem(item): try container.encode("playableItem", forKey: .type); try container.encode(item, forKey: .data)
        case let .playlist(playlist): try container.encode("playlist", forKey: .type); try container.encode(playlist, forKey: .data)
        case let .comment(comment): try container.encode("comment", forKey: .type); try container.encode(comment, forKey: .data)
        }
    }
}

/// A playlist as exported: its own fields and its entries in order, each entry by id.
public struct PlaylistRecord: Codable, Sendable, Hashable {
    /// One entry: its id, the item it plays and when it was added.
    public struct Entry: Codable, Sendable, Hashable {
        /// The entry's id.
        public var entryId: CatalogID
        /// The item it plays.
        public var playableItemId: CatalogID
        /// When it was added.
        public var addedAt: Date

        /// Creates an entry.
        public init(entryId: CatalogID, playableItemId: CatalogID, addedAt: Date) {
            self.entryId = entryId
            self.playableItemId = playableItemId
            self.addedAt = addedAt
        }
    }

    /// The playlist's id.
    public var id: CatalogID
    /// Its title.
    public var title: String
    /// Its description.
    public var description: String
    /// Its owner on the exporting server; kept by an import only when that user exists there.
    public var ownerId: CatalogID?
    /// Who sees it.
    public var visibility: Visibility
    /// Its cover, when it has one (the target must hold the image: `catalog import --images`).
    public var image: ImageReference?
    /// Its entries, in position order.
    public var entries: [Entry]
    /// When it was created.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date
    /// Its version.
    public var version: Int

    /// Creates a record.
    public init(
        id: CatalogID, title: String, description: String, ownerId: CatalogID? = nil, visibility: Visibility = .public, image: ImageReference? = nil,
        entries: [Entry], createdAt: Date, updatedAt: Date, version: Int
    ) {
        self.id = id
        self.title = title
        self.description = description
        self.ownerId = ownerId
        self.visibility = visibility
        self.image = image
        self.entries = entries
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }

    private enum CodingKeys: String, CodingKey { case id, title, description, ownerId, visibility, image, entries, createdAt, updatedAt, version }

    /// Decodes a record; exports made before accounts have no owner or visibility (public).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(CatalogID.self, forKey: .id)
        title = try container.decode(String.self, forKey: .title)
        description = try container.decode(String.self, forKey: .description)
        ownerId = try container.decodeIfPresent(CatalogID.self, forKey: .ownerId)
        visibility = try container.decodeIfPresent(Visibility.self, forKey: .visibility) ?? .public
        image = try container.decodeIfPresent(ImageReference.self, forKey: .image)
        entries = try container.decode([Entry].self, forKey: .entries)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        updatedAt = try container.decode(Date.self, forKey: .updatedAt)
        version = try container.decode(Int.self, forKey: .version)
    }

    /// The record of `playlist` with `entries`.
    public init(_ playlist: Playlist, entries: [PlaylistEntry]) {
        self.init(
            id: playlist.id, title: playlist.title, description: playlist.description, ownerId: playlist.ownerId, visibility: playlist.visibility,
            image: playlist.image, entries: entries.map { Entry(entryId: $0.entryId, playableItemId: $0.playableItem.id, addedAt: $0.addedAt) },
            createdAt: playlist.createdAt, updatedAt: playlist.updatedAt, version: playlist.version)
    }
}

/// The body of `POST /admin/import`: up to ``maxRecords`` records, applied together.
public struct ImportRequest: Codable, Sendable, Hashable {
    /// The records, in dependency order (items before the playlists and comments naming them).
    public var records: [CatalogRecord]

    /// The most records one request carries.
    public static let maxRecords = 1000

    /// Creates a request.
    public init(records: [CatalogRecord]) {
        self.records = records
    }
}

/// What an import did: each record created a resource, changed one, or found it already so.
public struct ImportSummary: Codable, Sendable, Hashable {
    /// Resources that did not exist.
    public var created: Int
    /// Resources that existed with other content.
    public var updated: Int
    /// Resources that already had this content (an import run twice changes nothing).
    public var unchanged: Int

    /// Creates a summary.
    public init(created: Int = 0, updated: Int = 0, unchanged: Int = 0) {
        self.created = created
        self.updated = updated
        self.unchanged = unchanged
    }
}
