import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Logging

/// Hosted video's side of the application: where its bytes are kept, and what tests,
/// operators and signals ask of it directly.
extension CatalogApplication {
    /// Where hosted video is kept: beside the images, in their bucket or their folder.
    static func videoStorage(_ mediaStore: any MediaStore, _ configuration: CatalogConfiguration) throws -> any VideoStorage {
        if let s3 = mediaStore as? S3MediaStore {
            try S3VideoStorage(
                s3, spool: configuration.videoSpoolDirectory ?? Self.besideDatabase("video-spool", configuration.databasePath),
                maxBytes: configuration.videoMaxBytes)
        } else if let local = mediaStore as? LocalMediaStore {
            try LocalVideoStorage(local)
        } else {
            throw MediaStoreError("No video storage for \(mediaStore.location)")
        }
    }

    /// Processes the video jobs waiting, one after another, here (the workers do it in the
    /// background; for tests that do not start them). - Returns: how many ran.
    @discardableResult
    public func processVideos() -> Int {
        var count = 0
        while videoProcessor.runOnce(worker: "now") { count += 1 }
        return count
    }

    /// The ffmpeg runs a job makes of the video file `source` (probed first), writing
    /// into `output`: the executable, then its arguments, each.
    public static func videoCommands(source: String, output: String) throws -> [[String]] {
        guard let pipeline = VideoPipeline() else { throw MediaStoreError("ffmpeg or ffprobe is not on PATH") }
        let scratch = NSTemporaryDirectory()
        let probe = try pipeline.probe(source, scratch: scratch)
        return VideoPipeline.commands(source: source, probe: probe, output: output, poster: output + "/poster.jpg").map { [pipeline.ffmpeg] + $0 }
    }

    /// Ends expired uploads and removes released videos' files now (the server does every minute).
    public func sweepVideos() {
        videoProcessor.sweep()
    }

    /// Puts the hosted videos' files kept beside the backup `path` into the media folder
    /// `mediaDirectory`: how many videos the backup holds, or `nil` when it has none beside it.
    public static func restoreVideos(from path: String, to mediaDirectory: String) throws -> Int? {
        let folder = backupMediaFolder(of: path)
        guard FileManager.default.fileExists(atPath: folder) else { return nil }
        return try LocalMediaStore(directory: folder).copyVideos(to: mediaDirectory)
    }

    /// Reads the playback key again (on SIGHUP), keeping the one in use valid as the
    /// previous key; a new random one when no key file is configured.
    public func rotatePlaybackKey() throws {
        try playbackSigner.rotate()
    }
}
