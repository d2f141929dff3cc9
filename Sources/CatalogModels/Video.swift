import Foundation

/// A video the catalog hosts for a ``PlayableItem``: uploaded resumably
/// (`POST /v1/playable-items/{id}/video`, tus 1.0.0 or the IETF resumable-upload draft),
/// then probed and packaged by the server (a faststart MP4 for direct play, HLS renditions
/// no larger than the source, a poster frame and a storyboard of scrubbing thumbnails).
/// Documents show it as the item's `video` member.
public struct Video: Codable, Sendable, Hashable {
    /// The video's id: its files are under `/v1/videos/{id}/`, and while it uploads its
    /// upload is `/v1/uploads/{id}` (for the user who uploads it).
    public var id: String
    /// Where the video is on its way.
    public var status: VideoStatus
    /// Its running time in seconds, once probed.
    public var durationSeconds: Double?
    /// The source's width in pixels, upright, once probed.
    public var width: Int?
    /// The source's height in pixels, upright, once probed.
    public var height: Int?
    /// The HLS master playlist's path (relative to the server), once ready: hand it to AVPlayer.
    public var hls: String?
    /// The faststart MP4's path, once ready: for direct play and downloads (byte ranges).
    public var mp4: String?
    /// A frame of the video as an image (the image pipeline's), once ready.
    public var poster: ImageReference?
    /// A WebVTT file of scrubbing thumbnails (`#xywh=` fragments of one sprite), once ready.
    public var storyboard: String?
    /// Why it failed, when it did.
    public var error: String?

    /// Creates a video value.
    public init(
        id: String, status: VideoStatus, durationSeconds: Double? = nil, width: Int? = nil, height: Int? = nil, hls: String? = nil, mp4: String? = nil,
        poster: ImageReference? = nil, storyboard: String? = nil, error: String? = nil
    ) {
        self.id = id
        self.status = status
        self.durationSeconds = durationSeconds
        self.width = width
        self.height = height
        self.hls = hls
        self.mp4 = mp4
        self.poster = poster
        self.storyboard = storyboard
        self.error = error
    }
}

/// Where a hosted video is on its way.
public enum VideoStatus: String, Codable, Sendable, CaseIterable {
    /// Its upload has begun and not finished.
    case uploading
    /// Its upload finished; the server is probing and packaging it.
    case processing
    /// It plays: ``Video/hls`` and ``Video/mp4`` are there.
    case ready
    /// It cannot be played: ``Video/error`` says why (not a video, truncated, too large, too long to package).
    case failed
}

/// The rules of hosted video, on the server and in clients alike.
public enum VideoRules {
    /// The largest upload, by default (20 GB); a server may set its own (`Tus-Max-Size`).
    public static let defaultMaxBytes = 20_000_000_000
    /// How long an unfinished upload is kept (24 hours) before it expires.
    public static let uploadLifetime: TimeInterval = 86_400
    /// The most bytes of unfinished uploads one user may hold at once, by default (40 GB).
    public static let defaultQuotaBytes = 40_000_000_000
    /// The most bytes of `Upload-Metadata` an upload keeps.
    public static let maxMetadataBytes = 4096
    /// The largest width or height a source may have (8K).
    public static let maxDimension = 8192
    /// The longest source the server packages (12 hours).
    public static let maxDurationSeconds = 43_200.0

    /// One HLS rendition: its height (the width follows the source's aspect) and bitrates.
    public struct Rendition: Sendable, Hashable {
        /// Its name in paths, such as `720p`.
        public var name: String { "\(height)p" }
        public var height: Int
        /// The video's bitrate in bits per second.
        public var videoBitrate: Int
        /// The audio's bitrate in bits per second.
        public var audioBitrate: Int
    }

    /// The ladder of renditions; a video gets those no taller than itself (and at least the smallest).
    public static let ladder = [
        Rendition(height: 360, videoBitrate: 800_000, audioBitrate: 96_000),
        Rendition(height: 720, videoBitrate: 2_800_000, audioBitrate: 128_000),
        Rendition(height: 1080, videoBitrate: 5_000_000, audioBitrate: 160_000),
    ]

    /// The renditions of a source `height` pixels tall: the rungs no taller than it, or the
    /// smallest (at the source's own height) for a source smaller than every rung.
    public static func renditions(forHeight height: Int) -> [Rendition] {
        let fitting = ladder.filter { $0.height <= height }
        guard fitting.isEmpty, let smallest = ladder.first else { return fitting }
        // Even heights only: H.264 in 4:2:0 needs them.
        return [Rendition(height: max(2, height - height % 2), videoBitrate: smallest.videoBitrate, audioBitrate: smallest.audioBitrate)]
    }
}
