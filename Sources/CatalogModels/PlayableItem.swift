import Foundation

/// A streaming video.
public struct PlayableItem: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier.
    public var id: CatalogID
    /// The title shown to viewers (1…200 characters).
    public var title: String
    /// A longer description (up to 5,000 characters; may be empty).
    public var description: String
    /// Where the video streams from: an absolute http(s) URL, such as an HLS playlist.
    public var streamURL: URL
    /// An optional poster image.
    public var thumbnailURL: URL?
    /// The poster uploaded for it (`PUT /v1/playable-items/{id}/image`), when there is one.
    public var image: ImageReference?
    /// The running time in seconds, when known (filled in by the server for a hosted video).
    public var durationSeconds: Double?
    /// The video the catalog hosts for it, once one was uploaded
    /// (`POST /v1/playable-items/{id}/video`).
    public var video: Video?
    /// The first page of top-level comments, newest first: present only when asked for
    /// with `include=comments`.
    public var comments: Page<Comment>?
    /// The first page of playlists holding the item: present only when asked for with
    /// `include=playlists`.
    public var playlists: Page<Playlist>?
    /// How many viewers like it (``Rating/like``); kept up to date within a few seconds.
    public var likeCount: Int
    /// How many views it has had (``ViewRules``); kept up to date within a few seconds.
    public var viewCount: Int
    /// The caller's own progress, favorite and rating: present only when asked for with
    /// `include=viewerState`.
    public var viewerState: ViewerState?
    /// When the item was created.
    public var createdAt: Date
    /// When the item last changed.
    public var updatedAt: Date
    /// Increases by one on every change; the `ETag` is this number in quotes.
    public var version: Int

    /// Creates an item value.
    public init(
        id: CatalogID, title: String, description: String, streamURL: URL, thumbnailURL: URL? = nil, image: ImageReference? = nil,
        durationSeconds: Double? = nil, video: Video? = nil, comments: Page<Comment>? = nil, playlists: Page<Playlist>? = nil, likeCount: Int = 0, viewCount: Int = 0,
        viewerState: ViewerState? = nil, createdAt: Date, updatedAt: Date, version: Int
    ) {
        self.id = id
        self.title = title
        self.description = description
        self.streamURL = streamURL
        self.thumbnailURL = thumbnailURL
        self.image = image
        self.durationSeconds = durationSeconds
        self.video = video
        self.comments = comments
        self.playlists = playlists
        self.likeCount = likeCount
        self.viewCount = viewCount
        self.viewerState = viewerState
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }

    private enum CodingKeys: String, CodingKey {
        case id, title, description, streamURL, thumbnailURL, image, durationSeconds, video, comments, playlists, likeCount, viewCount, viewerState
        case createdAt, updatedAt, version
    }

    /// Decodes an item; documents from before counts were kept (exports, a device's saved
    /// catalog) have none, and decode with zero.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(CatalogID.self, forKey: .id)
        title = try container.decode(String.self, forKey: .title)
        description = try container.decode(String.self, forKey: .description)
        streamURL = try container.decode(URL.self, forKey: .streamURL)
        thumbnailURL = try container.decodeIfPresent(URL.self, forKey: .thumbnailURL)
        image = try container.decodeIfPresent(ImageReference.self, forKey: .image)
        durationSeconds = try container.decodeIfPresent(Double.self, forKey: .durationSeconds)
        video = try container.decodeIfPresent(Video.self, forKey: .video)
        comments = try container.decodeIfPresent(Page<Comment>.self, forKey: .comments)
        playlists = try container.decodeIfPresent(Page<Playlist>.self, forKey: .playlists)
        likeCount = try container.decodeIfPresent(Int.self, forKey: .likeCount) ?? 0
        viewCount = try container.decodeIfPresent(Int.self, forKey: .viewCount) ?? 0
        viewerState = try container.decodeIfPresent(ViewerState.self, forKey: .viewerState)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        updatedAt = try container.decode(Date.self, forKey: .updatedAt)
        version = try container.decode(Int.self, forKey: .version)
    }
}

/// The body of `POST /v1/playable-items` and `PUT /v1/playable-items/{id}`.
public struct PlayableItemInput: Codable, Sendable, Hashable, Validatable {
    /// 1…200 characters.
    public var title: String
    /// Up to 5,000 characters; empty when absent.
    public var description: String
    /// An absolute http(s) URL, up to 2,048 characters.
    public var streamURL: URL
    /// An absolute http(s) URL, up to 2,048 characters.
    public var thumbnailURL: URL?
    /// 0…1,000,000 seconds.
    public var durationSeconds: Double?

    /// The allowed title length.
    public static let titleLength = 1...200
    /// The allowed description length.
    public static let descriptionLength = 0...5000
    /// The allowed duration.
    public static let durationRange = 0.0...1_000_000.0
    /// The rule `title` keeps.
    public static let titleRule = FieldRule<String>.text(length: titleLength)
    /// The rule `description` keeps.
    public static let descriptionRule = FieldRule<String>.text(length: descriptionLength, multiline: true)
    /// The rule `durationSeconds` keeps.
    public static let durationRule = FieldRule<Double>.number(in: durationRange)

    /// Creates an input value.
    public init(title: String, description: String = "", streamURL: URL, thumbnailURL: URL? = nil, durationSeconds: Double? = nil) {
        self.title = title
        self.description = description
        self.streamURL = streamURL
        self.thumbnailURL = thumbnailURL
        self.durationSeconds = durationSeconds
    }

    /// Decodes a body; `description` may be absent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        title = try container.decode(String.self, forKey: .title)
        description = try container.decodeIfPresent(String.self, forKey: .description) ?? ""
        streamURL = try container.decode(URL.self, forKey: .streamURL)
        thumbnailURL = try container.decodeIfPresent(URL.self, forKey: .thumbnailURL)
        durationSeconds = try container.decodeIfPresent(Double.self, forKey: .durationSeconds)
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(title, Self.titleRule, at: "/title")
        errors.check(description, Self.descriptionRule, at: "/description")
        errors.check(streamURL.absoluteString, .webURL, at: "/streamURL")
        if let thumbnailURL { errors.check(thumbnailURL.absoluteString, .webURL, at: "/thumbnailURL") }
        if let durationSeconds { errors.check(durationSeconds, Self.durationRule, at: "/durationSeconds") }
        return errors
    }
}

extension PlayableItemInput {
    /// The input that recreates `item` (for editing it).
    public init(_ item: PlayableItem) {
        self.init(
            title: item.title, description: item.description, streamURL: item.streamURL,
            thumbnailURL: item.thumbnailURL, durationSeconds: item.durationSeconds)
    }
}
