import Foundation

/// The kinds of a viewer's own state that `GET /v1/me/changes` carries.
public enum ViewerStateKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// Progress in an item (``PlaybackProgress``).
    case progress
    /// A favorite (``Favorite``, without its resource).
    case favorite
    /// A rating (``ItemRating``).
    case rating
}

/// One change of a viewer's own state (`GET /v1/me/changes`): the state as it now is, or
/// its removal (`deleted`: forgotten progress, a favorite removed, a rating taken back, or
/// the item deleted).
public struct ViewerChange: Codable, Sendable, Hashable {
    /// What changed.
    public var kind: ViewerStateKind
    /// The item (progress, ratings) or the favorite resource's id.
    public var id: CatalogID
    /// The favorite resource's kind (favorites only).
    public var favoriteType: FavoriteType?
    /// Whether the state is gone.
    public var deleted: Bool
    /// The progress as it now is (`progress`, unless deleted).
    public var progress: PlaybackProgress?
    /// The favorite (`favorite`, unless deleted).
    public var favorite: Favorite?
    /// The rating (`rating`, unless deleted).
    public var rating: ItemRating?

    /// Creates a change.
    public init(
        kind: ViewerStateKind, id: CatalogID, favoriteType: FavoriteType? = nil, deleted: Bool, progress: PlaybackProgress? = nil,
        favorite: Favorite? = nil, rating: ItemRating? = nil
    ) {
        self.kind = kind
        self.id = id
        self.favoriteType = favoriteType
        self.deleted = deleted
        self.progress = progress
        self.favorite = favorite
        self.rating = rating
    }
}

/// A page of `GET /v1/me/changes`.
public struct ViewerChangePage: Codable, Sendable, Hashable {
    /// The changes, oldest first; may be empty (a long-poll that saw nothing).
    public var changes: [ViewerChange]
    /// An opaque token, bound to the viewer: pass it as `since` in the next request.
    public var nextToken: String
    /// Whether more changes are already there: ask again at once.
    public var hasMore: Bool

    /// Creates a page.
    public init(changes: [ViewerChange], nextToken: String, hasMore: Bool) {
        self.changes = changes
        self.nextToken = nextToken
        self.hasMore = hasMore
    }
}
