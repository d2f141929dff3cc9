import Foundation

/// The kinds of resource the change feed (`GET /v1/changes`) reports, the values of its
/// `types` parameter and of a change's `type`.
public enum ChangeType: String, Codable, Sendable, Hashable, CaseIterable {
    /// A ``Game``.
    case game
    /// A ``PlayableItem``.
    case playableItem
    /// A ``Location``.
    case location
    /// A ``Playlist`` (an upsert also carries its entries).
    case playlist
    /// A ``Comment`` or reply.
    case comment
}

/// One change in the feed of `GET /v1/changes`: a resource created or changed (an upsert,
/// which carries the resource as `GET` returns it, and for a playlist all its entries), or
/// deleted.
///
/// ```json
/// {"type":"game","id":"…","version":3,"resource":{…}}
/// {"type":"playlist","id":"…","version":5,"resource":{…},"entries":[{"entryId":"…","playableItemId":"…","addedAt":"…"}]}
/// {"type":"game","id":"…","deleted":true,"version":4}
/// ```
///
/// Deleting a playlist deletes its entries; deleting a playable item deletes its comments
/// (each reported as its own change) and its entries in playlists (the playlists are
/// reported as upserts). Kinds the server adds later decode too, with ``knownType`` and
/// ``resource`` `nil`.
public struct Change: Codable, Sendable, Hashable {
    /// The kind of resource, such as `game`; may be a kind newer than ``ChangeType``.
    public var type: String
    /// The resource's id.
    public var id: CatalogID
    /// The resource's version after the change (a deletion has a version of its own).
    public var version: Int
    /// Whether the resource was deleted; `false` for an upsert.
    public var deleted: Bool
    /// The resource as it now is, for an upsert of a known kind; `nil` for a deletion and
    /// for kinds this version does not know.
    public var resource: ChangedResource?
    /// A playlist upsert's entries, all of them, in position order (an entry's position is
    /// its index); `nil` otherwise.
    public var entries: [ChangeEntry]?

    /// ``type`` when it is a kind this version knows.
    public var knownType: ChangeType? { ChangeType(rawValue: type) }

    /// Creates a change.
    public init(type: String, id: CatalogID, version: Int, deleted: Bool = false, resource: ChangedResource? = nil, entries: [ChangeEntry]? = nil) {
        self.type = type
        self.id = id
        self.version = version
        self.deleted = deleted
        self.resource = resource
        self.entries = entries
    }

    /// The upsert of `resource` (with `entries` for a playlist).
    public static func upsert(_ resource: ChangedResource, entries: [ChangeEntry]? = nil) -> Change {
        Change(type: resource.type.rawValue, id: resource.id, version: resource.version, resource: resource, entries: entries)
    }

    /// The deletion of the resource `id` of kind `type`, at `version`.
    public static func deletion(of type: ChangeType, id: CatalogID, version: Int) -> Change {
        Change(type: type.rawValue, id: id, version: version, deleted: true)
    }

    private enum CodingKeys: String, CodingKey { case type, id, version, deleted, resource, entries }

    /// Decodes a change, its `resource` as the kind `type` names; `deleted` is `false`
    /// when absent, and an unknown `type` leaves ``resource`` `nil`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        self.type = type
        id = try container.decode(CatalogID.self, forKey: .id)
        version = try container.decode(Int.self, forKey: .version)
        deleted = try container.decodeIfPresent(Bool.self, forKey: .deleted) ?? false
        entries = try container.decodeIfPresent([ChangeEntry].self, forKey: .entries)
        switch ChangeType(rawValue: type) {
        case .game?: resource = try container.decodeIfPresent(Game.self, forKey: .resource).map(ChangedResource.game)
        case .playableItem?: resource = try container.decodeIfPresent(PlayableItem.self, forKey: .resource).map(ChangedResource.playableItem)
        case .location?: resource = try container.decodeIfPresent(Location.self, forKey: .resource).map(ChangedResource.location)
        case .playlist?: resource = try container.decodeIfPresent(Playlist.self, forKey: .resource).map(ChangedResource.playlist)
        case .comment?: resource = try container.decodeIfPresent(Comment.self, forKey: .resource).map(ChangedResource.comment)
        case nil: resource = nil
        }
    }

    /// Encodes the change as the server sends it: `deleted` only when `true`, `resource`
    /// and `entries` only when present.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(id, forKey: .id)
        try container.encode(version, forKey: .version)
        if deleted { try container.encode(true, forKey: .deleted) }
        try container.encodeIfPresent(resource, forKey: .resource)
        try container.encodeIfPresent(entries, forKey: .entries)
    }
}

/// The resource an upsert carries, as `GET` on it returns it.
public enum ChangedResource: Sendable, Hashable, Encodable {
    /// A game.
    case game(Game)
    /// A playable item (without embedded comments or playlists).
    case playableItem(PlayableItem)
    /// A location.
    case location(Location)
    /// A playlist's own fields; its entries are the change's ``Change/entries``.
    case playlist(Playlist)
    /// A comment or reply.
    case comment(Comment)

    /// The resource's kind.
    public var type: ChangeType {
        switch self {
        case .game: .game
        case .playableItem: .playableItem
        case .location: .location
        case .playlist: .playlist
        case .comment: .comment
        }
    }

    /// The resource's id.
    public var id: CatalogID {
        switch self {
        case let .game(game): game.id
        case let .playableItem(item): item.id
        case let .location(location): location.id
        case let .playlist(playlist): playlist.id
        case let .comment(comment): comment.id
        }
    }

    /// The resource's version.
    public var version: Int {
        switch self {
        case let .game(game): game.version
        case let .playableItem(item): item.version
        case let .location(location): location.version
        case let .playlist(playlist): playlist.version
        case let .comment(comment): comment.version
        }
    }

    /// Encodes the resource itself (its JSON object, without a wrapper).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case let .game(game): try container.encode(game)
        case let .playableItem(item): try container.encode(item)
        case let .location(location): try container.encode(location)
        case let .playlist(playlist): try container.encode(playlist)
        case let .comment(comment): try container.encode(comment)
        }
    }
}

/// One entry of a playlist in a playlist upsert (`entryId`, `playableItemId`, `addedAt`):
/// the same shape as an exported playlist's entries.
public typealias ChangeEntry = PlaylistRecord.Entry

/// The answer of `GET /v1/changes`: `{"changes":[…],"nextToken":"…","hasMore":false}`.
public struct ChangePage: Codable, Sendable, Hashable {
    /// The changes, oldest first; may be empty (a long-poll that saw nothing).
    public var changes: [Change]
    /// An opaque token: pass it as `since` in the next request.
    public var nextToken: String
    /// Whether more changes are already there: ask again at once.
    public var hasMore: Bool

    /// Creates a page.
    public init(changes: [Change], nextToken: String, hasMore: Bool) {
        self.changes = changes
        self.nextToken = nextToken
        self.hasMore = hasMore
    }
}
