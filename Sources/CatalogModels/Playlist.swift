import Foundation

/// An ordered list of playable items.
public struct Playlist: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier.
    public var id: CatalogID
    /// The title (1…200 characters).
    public var title: String
    /// A description (up to 5,000 characters; may be empty).
    public var description: String
    /// How many entries the playlist holds.
    public var entryCount: Int
    /// Who owns it; `nil` for playlists from before accounts, and once the owner's account is deleted.
    public var ownerId: CatalogID?
    /// `public`: everyone sees it; `private`: only its owner, editors and admins do.
    public var visibility: Visibility
    /// The cover uploaded for it (`PUT /v1/playlists/{id}/image`), when there is one.
    public var image: ImageReference?
    /// The first page of entries, present only when asked for with `include=entries`.
    public var entries: Page<PlaylistEntry>?
    /// When the playlist was created.
    public var createdAt: Date
    /// When the playlist or its entries last changed.
    public var updatedAt: Date
    /// Increases by one on every change, entries included; the `ETag` is this number in quotes.
    public var version: Int

    /// Creates a playlist value.
    public init(
        id: CatalogID, title: String, description: String, entryCount: Int, ownerId: CatalogID? = nil, visibility: Visibility = .public,
        image: ImageReference? = nil, entries: Page<PlaylistEntry>? = nil, createdAt: Date, updatedAt: Date, version: Int
    ) {
        self.id = id
        self.title = title
        self.description = description
        self.entryCount = entryCount
        self.ownerId = ownerId
        self.visibility = visibility
        self.image = image
        self.entries = entries
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }
}

/// The body of `POST /v1/playlists` and `PUT /v1/playlists/{id}`.
public struct PlaylistInput: Codable, Sendable, Hashable, Validatable {
    /// 1…200 characters.
    public var title: String
    /// Up to 5,000 characters; empty when absent.
    public var description: String
    /// Who sees it; `public` when absent.
    public var visibility: Visibility

    /// The allowed title length.
    public static let titleLength = 1...200
    /// The allowed description length.
    public static let descriptionLength = 0...5000
    /// The rule `title` keeps.
    public static let titleRule = FieldRule<String>.text(length: titleLength)
    /// The most playlists one user may own.
    public static let maxPerUser = 1000
    /// The rule `description` keeps.
    public static let descriptionRule = FieldRule<String>.text(length: descriptionLength, multiline: true)

    /// Creates an input value.
    public init(title: String, description: String = "", visibility: Visibility = .public) {
        self.title = title
        self.description = description
        self.visibility = visibility
    }

    /// Decodes a body; `description` may be absent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        title = try container.decode(String.self, forKey: .title)
        description = try container.decodeIfPresent(String.self, forKey: .description) ?? ""
        visibility = try container.decodeIfPresent(Visibility.self, forKey: .visibility) ?? .public
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(title, Self.titleRule, at: "/title")
        errors.check(description, Self.descriptionRule, at: "/description")
        return errors
    }
}

extension Playlist {
    /// The entity tag of this version (`"4"`), for `If-Match` on the playlist and its
    /// entries, also when the playlist came shaped by `include` (whose `ETag` adds a digest).
    public var entityTag: String { "\"\(version)\"" }
}

extension PlaylistInput {
    /// The input that recreates `playlist`'s own fields (for editing it).
    public init(_ playlist: Playlist) {
        self.init(title: playlist.title, description: playlist.description, visibility: playlist.visibility)
    }
}

/// One entry of a playlist: a playable item at a position. The same item may appear
/// in several entries.
public struct PlaylistEntry: Codable, Sendable, Hashable {
    /// The entry's own identifier (not the item's).
    public var entryId: CatalogID
    /// The playlist holding the entry.
    public var playlistId: CatalogID
    /// The entry's place, from 0; positions are always 0…entryCount−1.
    public var position: Int
    /// The item the entry plays.
    public var playableItem: PlayableItem
    /// When the entry was added.
    public var addedAt: Date

    /// Creates an entry value.
    public init(entryId: CatalogID, playlistId: CatalogID, position: Int, playableItem: PlayableItem, addedAt: Date) {
        self.entryId = entryId
        self.playlistId = playlistId
        self.position = position
        self.playableItem = playableItem
        self.addedAt = addedAt
    }
}

/// The body of `POST /v1/playlists/{id}/entries`.
public struct PlaylistEntryInput: Codable, Sendable, Hashable, Validatable {
    /// The item to add.
    public var playableItemId: CatalogID
    /// Where to insert it (0…entryCount); appended when `nil`.
    public var position: Int?

    /// Where an entry may be inserted: 0…``PlaylistOrder/maxEntries`` (at most the
    /// number of entries, which the server checks).
    public static let positionRule = FieldRule<Int>.integer(in: 0...PlaylistOrder.maxEntries)
    /// Where an entry may be moved (`PATCH …/entries/{entryId}`): 0…``PlaylistOrder/legacyMaxEntries`` − 1
    /// (below the number of entries, which the server checks).
    public static let newPositionRule = FieldRule<Int>.integer(in: 0...(PlaylistOrder.legacyMaxEntries - 1))

    /// Creates an input value.
    public init(playableItemId: CatalogID, position: Int? = nil) {
        self.playableItemId = playableItemId
        self.position = position
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        if let position { errors.check(position, Self.positionRule, at: "/position") }
        return errors
    }
}

/// The body of `PUT /v1/playlists/{id}/entries`: the whole new order.
public struct PlaylistOrder: Codable, Sendable, Hashable {
    /// The items, in their new order (repeats allowed), at most ``maxEntries``.
    public var playableItemIds: [CatalogID]

    /// The most entries a playlist holds (YouTube's limit). Playlists filled before it was
    /// lowered from 10,000 keep their entries and take no more.
    public static let maxEntries = 5_000
    /// The most entries one user's playlists hold in all.
    public static let maxEntriesPerUser = 50_000
    /// The most entries a playlist ever held (before ``maxEntries`` was lowered to 5,000).
    public static let legacyMaxEntries = 10_000

    /// Creates an order.
    public init(playableItemIds: [CatalogID]) {
        self.playableItemIds = playableItemIds
    }
}

/// Who sees a playlist.
public enum Visibility: String, Codable, Sendable, Hashable, CaseIterable {
    /// Everyone.
    case `public`
    /// Only its owner, editors and admins; a 404 to everyone else.
    case `private`

    /// The rule a visibility's name keeps.
    public static let rule = FieldRule<String>.oneOf(allCases.map(\.rawValue))
}
