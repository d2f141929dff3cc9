import Foundation

/// A viewer's rating of a playable item.
public enum Rating: String, Codable, Sendable, Hashable, CaseIterable {
    /// Liked: counted in the item's `likeCount`.
    case like
    /// Disliked: known only to the viewer (no count shows it).
    case dislike
    /// No rating (the default; setting it takes a rating back).
    case none

    /// The rule a rating's name keeps.
    public static let rule = FieldRule<String>.oneOf(allCases.map(\.rawValue))
}

/// A viewer's rating of one item: `GET` and `PUT /v1/me/ratings/{playableItemId}`.
public struct ItemRating: Codable, Sendable, Hashable {
    /// The item.
    public var playableItemId: CatalogID
    /// The rating.
    public var rating: Rating
    /// When the viewer rated it; absent for `none`.
    public var ratedAt: Date?

    /// Creates a rating value.
    public init(playableItemId: CatalogID, rating: Rating, ratedAt: Date? = nil) {
        self.playableItemId = playableItemId
        self.rating = rating
        self.ratedAt = ratedAt
    }
}

/// The body of `PUT /v1/me/ratings/{playableItemId}`.
public struct RatingInput: Codable, Sendable, Hashable {
    /// The rating.
    public var rating: Rating

    /// Creates a rating body.
    public init(rating: Rating) { self.rating = rating }
}

/// The body of `POST /v1/playable-items/{id}/views`: a player's report that it is playing
/// the item, sent once it has played a while (more reports are harmless: a view counts once).
public struct ViewInput: Codable, Sendable, Hashable, Validatable {
    /// The playback session: any identifier the player keeps for one playing of the item
    /// (1…100 characters). A signed-in viewer's views count once whatever the session.
    public var sessionId: String
    /// How far the session has played, in seconds.
    public var positionSeconds: Double
    /// The item's running time, as the player knows it (the item's own counts first).
    public var durationSeconds: Double?

    /// The rule `sessionId` keeps.
    public static let sessionRule = FieldRule<String>.text(length: 1...100)

    /// Creates a view report.
    public init(sessionId: String, positionSeconds: Double, durationSeconds: Double? = nil) {
        self.sessionId = sessionId
        self.positionSeconds = positionSeconds
        self.durationSeconds = durationSeconds
    }

    /// Every rule this report breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(sessionId, Self.sessionRule, at: "/sessionId")
        errors.check(positionSeconds, ProgressInput.secondsRule, at: "/positionSeconds")
        if let durationSeconds { errors.check(durationSeconds, ProgressInput.secondsRule, at: "/durationSeconds") }
        return errors
    }
}

/// What `POST /v1/playable-items/{id}/views` did.
public struct ViewAnswer: Codable, Sendable, Hashable {
    /// Whether this report counted a view (`false`: not played long enough yet, or this
    /// viewer's view of the item was counted in the last 24 hours).
    public var counted: Bool

    /// Creates an answer.
    public init(counted: Bool) { self.counted = counted }
}

/// When a view counts: once per viewer (or anonymous session) per item per
/// ``window``, after ``minimumSeconds`` or half the item, whichever is shorter.
public enum ViewRules {
    /// A view counts after this many seconds played…
    public static let minimumSeconds = 30.0
    /// …or this fraction of the item, when that is shorter.
    public static let minimumFraction = 0.5
    /// A viewer's next view of the same item counts this long after the last.
    public static let window: TimeInterval = 24 * 3600
    /// At most this many anonymous sessions from one address count a view of one item per ``window``.
    public static let sessionsPerAddress = 20

    /// Whether a session at `position` seconds into an item running `duration` has played
    /// long enough to count.
    public static func hasPlayedEnough(position: Double, duration: Double?) -> Bool {
        let needed = duration.flatMap { $0 > 0 ? min(minimumSeconds, $0 * minimumFraction) : nil } ?? minimumSeconds
        return position >= needed
    }
}

/// A viewer's own state in an item, embedded with `include=viewerState` (the answer is
/// then `private` to the caller).
public struct ViewerState: Codable, Sendable, Hashable {
    /// Where the viewer is, when it has played the item.
    public var progress: PlaybackProgress?
    /// Whether the item is one of the viewer's favorites.
    public var favorite: Bool
    /// The viewer's rating.
    public var rating: Rating

    /// Creates a viewer's state.
    public init(progress: PlaybackProgress? = nil, favorite: Bool, rating: Rating) {
        self.progress = progress
        self.favorite = favorite
        self.rating = rating
    }
}
