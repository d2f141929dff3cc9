import Foundation

/// What a viewer can mark as a favorite: `PUT /v1/me/favorites/{type}/{id}`, where the
/// type is the collection's path segment.
public enum FavoriteType: String, Codable, Sendable, Hashable, CaseIterable {
    /// A playable item (`playable-items`).
    case playableItem
    /// A game (`games`).
    case game
    /// A playlist (`playlists`).
    case playlist

    /// The collection's path segment, as in `/v1/me/favorites/playable-items/{id}`.
    public var pathSegment: String {
        switch self {
        case .playableItem: "playable-items"
        case .game: "games"
        case .playlist: "playlists"
        }
    }

    /// The type whose path segment is `segment`.
    public init?(pathSegment segment: some StringProtocol) {
        guard let type = Self.allCases.first(where: { $0.pathSegment == segment }) else { return nil }
        self = type
    }
}

/// The most favorites one viewer keeps.
public enum FavoriteRules {
    /// At most this many favorites per viewer, of every type together.
    public static let maxPerViewer = 10_000
}

/// One of a viewer's favorites (`GET /v1/me/favorites`), with the resource as everyone who
/// may see it sees it: exactly one of `playableItem`, `game` and `playlist`, by `type`.
public struct Favorite: Codable, Sendable, Hashable {
    /// The kind of resource.
    public var type: FavoriteType
    /// The resource's id.
    public var id: CatalogID
    /// When the viewer made it a favorite.
    public var favoritedAt: Date
    /// The item, when `type` is `playableItem`.
    public var playableItem: PlayableItem?
    /// The game, when `type` is `game`.
    public var game: Game?
    /// The playlist, when `type` is `playlist`.
    public var playlist: Playlist?

    /// Creates a favorite.
    public init(
        type: FavoriteType, id: CatalogID, favoritedAt: Date, playableItem: PlayableItem? = nil, game: Game? = nil, playlist: Playlist? = nil
    ) {
        self.type = type
        self.id = id
        self.favoritedAt = favoritedAt
        self.playableItem = playableItem
        self.game = game
        self.playlist = playlist
    }
}
