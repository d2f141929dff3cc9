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
    /// A ``Playlist``'s own fields (its entries are changes of their own).
    case playlist
    /// An entry of a playlist (``ChangedEntry``): added, moved or removed.
    case playlistEntry
    /// A ``Comment`` or reply.
    case comment
}

/// One change in the feed of `GET /v1/changes`: a resource created or changed (an upsert,
/// which carries the resource as `GET` returns it; a playlist entry as ``ChangedEntry``),
/// or deleted.
///
/// ```json
/// {"type":"game","id":"…","version":3,"resource":{…}}
/// {"type":"playlistEntry","id":"…","version":2,"resource":{"entryId":"…","playlistId":"…","playableItemId":"…","addedAt":"…","orderKey":8589934592}}
/// {"type":"game","id":"…","deleted":true,"version":4}
/// ```
///
/// Deleting a playlist deletes its entries (only the playlist's deletion is reported);
/// deleting a playable item deletes its comments and its entries in playlists (each
/// reported as its own change, and the playlists as upserts). Kinds the server adds
/// later decode too, with ``knownType`` and ``resource`` `nil`.
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

    /// ``type`` when it is a kind this version knows.
    public var knownType: ChangeType? { ChangeType(rawValue: type) }

    /// Creates a change.
    public init(type: String, id: CatalogID, version: Int, deleted: Bool = false, resource: ChangedResource? = nil) {
        self.type = type
        self.id = id
        self.version = version
        self.deleted = deleted
        self.resource = resource
    }

    /// The upsert of `resource` at `version` (a resource's own, when it has one).
    public static func upsert(_ resource: ChangedResource, version: Int? = nil) -> Change {
        Change(type: resource.type.rawValue, id: resource.id, version: version ?? resource.version ?? 1, resource: resource)
    }

    /// The deletion of the resource `id` of kind `type`, at `version`.
    public static func deletion(of type: ChangeType, id: CatalogID, version: Int) -> Change {
        Change(type: type.rawValue, id: id, version: version, deleted: true)
    }

    private enum CodingKeys: String, CodingKey { case type, id, version, deleted, resource }

    /// Decodes a change, its `resource` as the kind `type` names; `deleted` is `false`
    /// when absent, and an unknown `type` leaves ``resource`` `nil`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        self.type = type
        id = try container.decode(CatalogID.self, forKey: .id)
        version = try container.decode(Int.self, forKey: .version)
        deleted = try container.decodeIfPresent(Bool.self, forKey: .deleted) ?? false
        switch ChangeType(rawValue: type) {
        case .game?: resource = try container.decodeIfPresent(Game.self, forKey: .resource).map(ChangedResource.game)
        case .playableItem?: resource = try container.decodeIfPresent(PlayableItem.self, forKey: .resource).map(ChangedResource.playableItem)
        case .location?: resource = try container.decodeIfPresent(Location.self, forKey: .resource).map(ChangedResource.location)
        case .playlist?: resource = try container.decodeIfPresent(Playlist.self, forKey: .resource).map(ChangedResource.playlist)
        case .comment?: resource = try container.decodeIfPresent(Comment.self, forKey: .resource).map(ChangedResource.comment)
        case .playlistEntry?: resource = try container.decodeIfPresent(ChangedEntry.self, forKey: .resource).map(ChangedResource.playlistEntry)
        case nil: resource = nil
        }
    }

    /// Encodes the change as the server sends it: `deleted` only when `true`, `resource`
    /// only when present.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(id, forKey: .id)
        try container.encode(version, forKey: .version)
        if deleted { try container.encode(true, forKey: .deleted) }
        try container.encodeIfPresent(resource, forKey: .resource)
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
    /// A playlist's own fields.
    case playlist(Playlist)
    /// A comment or reply.
    case comment(Comment)
    /// An entry of a playlist.
    case playlistEntry(ChangedEntry)

    /// The resource's kind.
    public var type: ChangeType {
        switch self {
        case .game: .game
        case .playableItem: .playableItem
        case .location: .location
        case .playlist: .playlist
        case .comment: .comment
        case .playlistEntry: .playlistEntry
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
        case let .playlistEntry(entry): entry.entryId
        }
    }

    /// The resource's version; `nil` for an entry (its version is the change's).
    public var version: Int? {
        switch self {
        case let .game(game): game.version
        case let .playableItem(item): item.version
        case let .location(location): location.version
        case let .playlist(playlist): playlist.version
        case let .comment(comment): comment.version
        case .playlistEntry: nil
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
        case let .playlistEntry(entry): try container.encode(entry)
        }
    }
}

/// One entry of a playlist (`entryId`, `playableItemId`, `addedAt`), as an exported
/// playlist lists them and ``CatalogSync`` gives them, in order.
public typealias ChangeEntry = PlaylistRecord.Entry

/// A playlist entry as the change feed carries it. A playlist's entries, sorted by
/// ``orderKey`` (then ``entryId``), are in the playlist's order: an entry's position is
/// its index there. A change of one entry (added, moved, removed) is one change of the
/// feed, whatever the playlist's length; now and then a move also gives a few
/// neighbouring entries new keys, each reported as its own change.
public struct ChangedEntry: Codable, Sendable, Hashable, Identifiable {
    /// The entry's id.
    public var entryId: CatalogID
    /// The playlist it belongs to.
    public var playlistId: CatalogID
    /// The item it plays.
    public var playableItemId: CatalogID
    /// When it was added.
    public var addedAt: Date
    /// Where it sorts among its playlist's entries (opaque: only the order means anything).
    public var orderKey: Int64

    /// The range of order keys.
    public static let orderKeys: ClosedRange<Int64> = 0...(1 << 62)

    /// The entry's id.
    public var id: CatalogID { entryId }

    /// Creates an entry.
    public init(entryId: CatalogID, playlistId: CatalogID, playableItemId: CatalogID, addedAt: Date, orderKey: Int64) {
        self.entryId = entryId
        self.playlistId = playlistId
        self.playableItemId = playableItemId
        self.addedAt = addedAt
        self.orderKey = orderKey
    }

    /// The entry as a playlist's export lists it.
    public var entry: ChangeEntry { ChangeEntry(entryId: entryId, playableItemId: playableItemId, addedAt: addedAt) }
}

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
