import Foundation

/// The kinds of line in `GET /v1/me/export`: each line is `{"data":…,"type":"…"}`, one
/// JSON object, and together they are everything the catalog holds about the caller.
public enum AccountExportType: String, Codable, Sendable, Hashable, CaseIterable {
    /// The caller's profile (``User``), as the caller sees it.
    case user
    /// The identity provider's (issuer, subject) the account was made for (``IdentityLink``).
    case identity
    /// An API key's metadata (never its secret, which is kept only as a digest).
    case apiKey
    /// A comment the caller wrote (``Comment``).
    case comment
    /// A playlist the caller owns (``Playlist``).
    case playlist
    /// An entry of one of those playlists.
    case playlistEntry
    /// The caller's progress in an item (``PlaybackProgress``).
    case progress
    /// One of the caller's favorites (``Favorite``, without its resource).
    case favorite
    /// The caller's rating of an item (``ItemRating``).
    case rating
    /// A view of an item counted for the caller in the last 24 hours (``CountedView``).
    case view
}

/// The identity provider account a user was made for.
public struct IdentityLink: Codable, Sendable, Hashable {
    /// The provider (`iss`).
    public var issuer: String
    /// The caller's id at the provider (`sub`).
    public var subject: String

    /// Creates a link.
    public init(issuer: String, subject: String) {
        self.issuer = issuer
        self.subject = subject
    }
}

/// A view of an item counted for a viewer: kept for 24 hours, so that it counts once a day.
public struct CountedView: Codable, Sendable, Hashable {
    /// The item.
    public var playableItemId: CatalogID
    /// When it was counted.
    public var countedAt: Date

    /// Creates a counted view.
    public init(playableItemId: CatalogID, countedAt: Date) {
        self.playableItemId = playableItemId
        self.countedAt = countedAt
    }
}
