import Foundation

/// Where one viewer is in one playable item, as every device of theirs sees it:
/// `GET /v1/me/progress/{playableItemId}` and the entries of "Continue watching".
public struct PlaybackProgress: Codable, Sendable, Hashable {
    /// The item.
    public var playableItemId: CatalogID
    /// Where the viewer is, in seconds from the start.
    public var positionSeconds: Double
    /// The item's running time, as the player reported it (or the item's own), when known.
    public var durationSeconds: Double?
    /// Whether the viewer finished it (90% or more played, or said so), and has not begun it again.
    public var played: Bool
    /// How many times the viewer finished it.
    public var playCount: Int
    /// When the playback that wrote this happened: the player's clock, never later than the
    /// server's when it arrived.
    public var watchedAt: Date
    /// The device of that playback.
    public var deviceId: String
    /// Increases by one on every change.
    public var version: Int

    /// Creates a progress value.
    public init(
        playableItemId: CatalogID, positionSeconds: Double, durationSeconds: Double? = nil, played: Bool, playCount: Int, watchedAt: Date,
        deviceId: String, version: Int
    ) {
        self.playableItemId = playableItemId
        self.positionSeconds = positionSeconds
        self.durationSeconds = durationSeconds
        self.played = played
        self.playCount = playCount
        self.watchedAt = watchedAt
        self.deviceId = deviceId
        self.version = version
    }
}

/// A player's heartbeat: the body of `PUT /v1/me/progress/{playableItemId}`, sent every
/// few seconds while playing, and on pause or stop.
public struct ProgressInput: Codable, Sendable, Hashable, Validatable {
    /// Where the viewer is, in seconds.
    public var positionSeconds: Double
    /// The item's running time, as the player knows it.
    public var durationSeconds: Double?
    /// When this happened, by the device's clock (it may be offline and send it later).
    public var clientTime: Date
    /// The device (any stable identifier of the app's install, 1…100 characters).
    public var deviceId: String
    /// `true` when the player ended the item (counted as played whatever the position).
    public var played: Bool?

    /// The allowed positions and durations, in seconds.
    public static let secondsRule = FieldRule<Double>.number(in: 0...PlayableItemInput.durationRange.upperBound)
    /// The rule `deviceId` keeps.
    public static let deviceRule = FieldRule<String>.text(length: 1...100)

    /// Creates a heartbeat.
    public init(positionSeconds: Double, durationSeconds: Double? = nil, clientTime: Date, deviceId: String, played: Bool? = nil) {
        self.positionSeconds = positionSeconds
        self.durationSeconds = durationSeconds
        self.clientTime = clientTime
        self.deviceId = deviceId
        self.played = played
    }

    /// Every rule this heartbeat breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(positionSeconds, Self.secondsRule, at: "/positionSeconds")
        if let durationSeconds { errors.check(durationSeconds, Self.secondsRule, at: "/durationSeconds") }
        errors.check(deviceId, Self.deviceRule, at: "/deviceId")
        return errors
    }
}

/// What a heartbeat did: the progress as it now is, and whether the heartbeat changed it
/// (`false`: an older playback's, which changes nothing).
public struct ProgressAnswer: Codable, Sendable, Hashable {
    /// Whether the heartbeat was applied.
    public var applied: Bool
    /// The progress as it now is.
    public var progress: PlaybackProgress

    /// Creates an answer.
    public init(applied: Bool, progress: PlaybackProgress) {
        self.applied = applied
        self.progress = progress
    }
}

/// An entry of "Continue watching" (`GET /v1/me/continue-watching`): the progress, and the
/// item as the screen shows it.
public struct ContinueWatchingEntry: Codable, Sendable, Hashable {
    /// Where the viewer is.
    public var progress: PlaybackProgress
    /// The item.
    public var playableItem: PlayableItem

    /// Creates an entry.
    public init(progress: PlaybackProgress, playableItem: PlayableItem) {
        self.progress = progress
        self.playableItem = playableItem
    }
}

/// The one rule for a viewer's progress, which the server applies and a device applies
/// offline alike, so that every device converges on the same state whatever order the
/// heartbeats arrive in: the most recent playback wins.
public enum ProgressRules {
    /// From this fraction of the running time on, an item counts as played.
    public static let playedFraction = 0.9
    /// From this fraction on (and below ``playedFraction``), it is begun: "Continue watching".
    public static let begunFraction = 0.05
    /// Begun, when the running time is unknown: at least this many seconds in.
    public static let begunSecondsWithoutDuration = 30.0

    /// The progress after `heartbeat`, received at `receivedAt` (the server's clock),
    /// given the `stored` one and the item's own running time, and whether it changed
    /// anything.
    ///
    /// - A heartbeat's playback time is its `clientTime`, clamped to `receivedAt`: a wrong
    ///   clock cannot pin a position in the future.
    /// - The later playback wins (by that time, then by device id, so two devices with the
    ///   same time agree); an older one changes nothing. Rewatching from the start works:
    ///   the newer playback is at the start.
    /// - Reaching ``playedFraction`` (or `played: true`) marks the item played and counts
    ///   one more play, once; a later playback below it begins the item again.
    public static func apply(
        _ heartbeat: ProgressInput, receivedAt: Date, to stored: PlaybackProgress?, item: CatalogID, itemDuration: Double?
    ) -> (progress: PlaybackProgress, applied: Bool) {
        let watchedAt = Date(timeIntervalSince1970: (min(heartbeat.clientTime, receivedAt).timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        let duration = heartbeat.durationSeconds ?? stored?.durationSeconds ?? itemDuration
        let finished = heartbeat.played == true || duration.map { $0 > 0 && heartbeat.positionSeconds >= playedFraction * $0 } ?? false
        if let stored {
            // One total order of playbacks, so every order of arrival ends the same: time,
            // then device, then what the heartbeat says (clamped times can be equal).
            let incoming = order(watchedAt, heartbeat.deviceId, heartbeat.positionSeconds, finished, duration)
            let kept = order(stored.watchedAt, stored.deviceId, stored.positionSeconds, stored.played, stored.durationSeconds)
            if incoming < kept { return (stored, false) }
            if incoming == kept { return (stored, true) }
        }
        let wasPlayed = stored?.played ?? false
        let next = PlaybackProgress(
            playableItemId: item, positionSeconds: heartbeat.positionSeconds, durationSeconds: duration, played: finished,
            playCount: (stored?.playCount ?? 0) + (finished && !wasPlayed ? 1 : 0), watchedAt: watchedAt, deviceId: heartbeat.deviceId,
            version: (stored?.version ?? 0) + 1)
        return (next, true)
    }

    /// A playback's place in the order the rule keeps.
    private static func order(_ time: Date, _ device: String, _ position: Double, _ played: Bool, _ duration: Double?) -> (Date, String, Double, Int, Double) {
        (time, device, position, played ? 1 : 0, duration ?? -1)
    }

    /// Whether `progress` belongs in "Continue watching": begun, not finished.
    public static func isBegun(_ progress: PlaybackProgress) -> Bool {
        guard !progress.played else { return false }
        guard let duration = progress.durationSeconds, duration > 0 else { return progress.positionSeconds >= begunSecondsWithoutDuration }
        return progress.positionSeconds >= begunFraction * duration
    }
}

/// An entry of "Up next" (`GET /v1/me/up-next`): in a playlist the viewer is going
/// through, the entry after the last one it finished.
public struct UpNextEntry: Codable, Sendable, Hashable {
    /// The entry the viewer finished most recently in the playlist.
    public var after: CatalogID
    /// The entry to play next.
    public var next: PlaylistEntry
    /// The playlist.
    public var playlist: Playlist
    /// When the viewer last played the finished entry's item.
    public var watchedAt: Date

    /// Creates an entry.
    public init(after: CatalogID, next: PlaylistEntry, playlist: Playlist, watchedAt: Date) {
        self.after = after
        self.next = next
        self.playlist = playlist
        self.watchedAt = watchedAt
    }
}
