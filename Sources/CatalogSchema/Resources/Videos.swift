import CatalogModels
import Foundation

/// The `video` member of a playable item (``ResourceSchema/playableItem``) as the store
/// keeps it: the compact JSON of a ``Video``, keys sorted as every rendering sorts them,
/// written only by the server as the video's upload and processing go. A ready video also
/// sets the item's running time and, when the server knows its public URL, its stream URL
/// (the columns below).
package enum VideoMember {
    /// The JSON kept for `video`.
    package static func json(_ video: Video) -> String {
        // The wire encoder itself (sorted keys): the member renders as the model encodes.
        (try? encoder.encode(video)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }

    private static let encoder = CatalogJSON.makeEncoder()

    /// The path of a video's files: `/v1/videos/{id}/media/` and a file's name.
    package static func mediaPrefix(_ id: String) -> String { "/v1/videos/\(id)/media/" }

    /// The names of a video's files that documents link to.
    package static let master = "master.m3u8", mp4 = "video.mp4", storyboardImage = "storyboard.jpg", storyboardText = "storyboard.vtt"

    /// A ready video as documents show it: its facts, and where its files are.
    package static func ready(id: String, duration: Double, width: Int, height: Int, poster: ImageReference) -> Video {
        let prefix = mediaPrefix(id)
        return Video(
            id: id, status: .ready, durationSeconds: (duration * 1000).rounded() / 1000, width: width, height: height, hls: prefix + master,
            mp4: prefix + mp4, poster: poster, storyboard: prefix + storyboardText)
    }

    /// What stands right before a media path the server wrote in a rendered document: the
    /// paths of the `video` member, and a hosted item's stream URL at `publicURL`.
    package static func writtenPathPrefixes(publicURL: String?) -> [String] {
        ["\"hls\":\"", "\"mp4\":\"", "\"storyboard\":\""] + (publicURL.map { ["\"streamURL\":\"" + $0] } ?? [])
    }

    /// The item's running time, which a ready video fills in.
    package static let durationColumn = "duration_seconds"
    /// The item's stream URL, which a ready video sets to its HLS playlist.
    package static let streamColumn = "stream_url"
}
