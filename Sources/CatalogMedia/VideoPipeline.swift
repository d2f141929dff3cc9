import CatalogModels
import CatalogSchema
import Foundation

/// What ffprobe found in a source.
package struct VideoProbe: Sendable, Equatable {
    /// Its running time in seconds.
    package var duration: Double
    /// Its picture's size, upright (a rotation applied).
    package var width: Int
    package var height: Int
    /// Whether it has sound.
    package var hasAudio: Bool
}

/// Why a source cannot be packaged: the reason its item shows.
package struct VideoRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// What packaging left beside the output directory.
package struct PackagedVideo: Sendable, Equatable {
    /// The poster frame (JPEG), outside the media directory: it goes to the image pipeline.
    package var posterPath: String
}

/// Hosted video's processing, as child processes with limits (``LimitedProcess``): ffprobe
/// reads what a source is; one ffmpeg run decodes it once into every HLS rendition (H.264
/// and AAC in fMP4 segments, no rendition taller than the source) and the storyboard
/// sprite; the top rendition is remuxed (no second encode) into a faststart MP4; one more
/// quick run takes the poster frame. A source that is not video, claims absurd
/// dimensions, is too long, is truncated, or makes ffmpeg pass its limits is refused with
/// a reason.
package struct VideoPipeline: Sendable {
    package let ffmpeg: String
    package let ffprobe: String
    /// The media files' names (those documents link to are ``VideoMember``'s).
    package static let master = VideoMember.master, mp4 = VideoMember.mp4, storyboardImage = VideoMember.storyboardImage
    package static let storyboardText = VideoMember.storyboardText
    /// A segment's target length in seconds.
    package static let segmentSeconds = 4
    /// The storyboard's thumbnails: width, and how many a row holds.
    package static let thumbnailWidth = 160, thumbnailsPerRow = 10, maxThumbnails = 100

    /// The pipeline with the programs on `PATH`; `nil` when ffmpeg or ffprobe is missing.
    package init?() {
        guard let ffmpeg = LimitedProcess.find("ffmpeg"), let ffprobe = LimitedProcess.find("ffprobe") else { return nil }
        self.ffmpeg = ffmpeg
        self.ffprobe = ffprobe
    }

    /// The containers a source may be: no playlist, concatenation list or image sequence,
    /// which could name other files or network addresses.
    static let sourceFormats = "mov,matroska,webm,avi,mpegts,mpeg,flv,ogg,asf,mxf,h264,hevc,yuv4mpegpipe"

    /// The input options and input of a run over the untrusted `source`: local files only,
    /// and only the containers of video (``sourceFormats``).
    static func untrusted(_ source: String) -> [String] {
        ["-protocol_whitelist", "file", "-format_whitelist", sourceFormats, "-i", "file:" + source]
    }

    /// The longest one run may take.
    static let maxRunSeconds = 4 * 3600

    /// The limits of a run over a source of `duration` seconds and `bytes`.
    package static func limits(duration: Double, bytes: Int) -> ProcessLimits {
        // The length is the file's word: the bound stops at four hours however long it claims to be.
        let wall = min(600 + Int(duration * 4), maxRunSeconds)
        return ProcessLimits(wallClock: .seconds(wall), cpuSeconds: wall * 2, memoryBytes: 4 << 30, fileBytes: max(2 * bytes, 1 << 30))
    }

    /// What the source at `source` is; refused when it is not a video this server packages.
    package func probe(_ source: String, scratch: String, isCancelled: @Sendable () -> Bool = { false }) throws -> VideoProbe {
        let run = try LimitedProcess.run(
            ffprobe, ["-v", "error", "-print_format", "json", "-show_format", "-show_streams"] + Self.untrusted(source),
            limits: ProcessLimits(wallClock: .seconds(60), cpuSeconds: 60, memoryBytes: 1 << 30, fileBytes: 1 << 20), scratch: scratch, outputLimit: 4 << 20,
            isCancelled: isCancelled)
        guard run.outcome == .exited(0) else {
            if run.outcome == .cancelled { throw CancellationError() }
            // Its words, without the server's path of the file.
            let said = run.errors.split(separator: "\n").last.map { Self.withoutPaths($0).prefix(200) } ?? ""
            throw VideoRefusal("The file is not a video ffprobe can read" + (said.isEmpty ? "." : ": \(said)"))
        }
        return try Self.probe(json: run.output)
    }

    /// The probe ffprobe's JSON `json` describes; refused when it is no video to package.
    package static func probe(json: [UInt8]) throws -> VideoProbe {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any], let streams = object["streams"] as? [[String: Any]] else {
            throw VideoRefusal("The file is not a video (ffprobe could not read it).")
        }
        // Cover art is a video stream of one picture: not the video.
        let video = streams.first { ($0["codec_type"] as? String) == "video" && (($0["disposition"] as? [String: Any])?["attached_pic"] as? Int ?? 0) == 0 }
        guard let video, var width = video["width"] as? Int, var height = video["height"] as? Int else {
            throw VideoRefusal("The file has no video stream.")
        }
        guard (2...VideoRules.maxDimension).contains(width), (2...VideoRules.maxDimension).contains(height) else {
            throw VideoRefusal("The video claims \(width)×\(height) pixels; at most \(VideoRules.maxDimension) a side is packaged.")
        }
        if Self.rotation(video) % 180 != 0 { swap(&width, &height) }
        let format = object["format"] as? [String: Any]
        let duration = (format?["duration"] as? String).flatMap(Double.init) ?? (video["duration"] as? String).flatMap(Double.init) ?? 0
        guard duration.isFinite, duration > 0 else { throw VideoRefusal("The video has no running time (it may be truncated).") }
        guard duration <= VideoRules.maxDurationSeconds else {
            throw VideoRefusal("The video runs \(Int(duration)) s; at most \(Int(VideoRules.maxDurationSeconds)) s are packaged.")
        }
        let hasAudio = streams.contains { ($0["codec_type"] as? String) == "audio" }
        return VideoProbe(duration: duration, width: width, height: height, hasAudio: hasAudio)
    }

    /// The rotation of a video stream in degrees (its display matrix, or an old `rotate` tag).
    private static func rotation(_ stream: [String: Any]) -> Int {
        if let sideData = stream["side_data_list"] as? [[String: Any]] {
            for entry in sideData { if let rotation = entry["rotation"] as? Int { return abs(rotation) } }
        }
        return (stream["tags"] as? [String: Any])?["rotate"].flatMap { ($0 as? String).flatMap(Int.init) }.map(abs) ?? 0
    }

    /// The renditions of a source of `probe`: the ladder by its short side.
    package static func renditions(_ probe: VideoProbe) -> [VideoRules.Rendition] {
        VideoRules.renditions(forHeight: min(probe.width, probe.height))
    }

    /// The ffmpeg runs that package `source` (of `probe`) into `output` (the media files)
    /// and `poster`, in order: HLS and storyboard in one decode, the MP4 remuxed from the
    /// top rendition, the poster frame. The benchmark runs the same by hand.
    package static func commands(source: String, probe: VideoProbe, output: String, poster: String) -> [[String]] {
        let renditions = renditions(probe)
        let portrait = probe.height > probe.width
        let interval = storyboardInterval(probe.duration)
        let thumbnailHeight = thumbnailHeight(probe)
        let rows = (thumbnailCount(probe.duration) + thumbnailsPerRow - 1) / thumbnailsPerRow
        var graph = "[0:v:0]split=\(renditions.count + 1)" + renditions.indices.map { "[s\($0)]" }.joined() + "[sb]"
        for (index, rendition) in renditions.enumerated() {
            let scale = portrait ? "\(rendition.height):-2" : "-2:\(rendition.height)"
            graph += ";[s\(index)]scale=\(scale),format=yuv420p[v\(index)]"
        }
        graph += ";[sb]fps=1/\(interval),scale=\(thumbnailWidth):\(thumbnailHeight),tile=\(thumbnailsPerRow)x\(max(1, rows))[board]"
        var hls = ["-nostdin", "-v", "error", "-y"] + untrusted(source) + ["-filter_complex", graph]
        var streams: [String] = []
        for (index, rendition) in renditions.enumerated() {
            hls += ["-map", "[v\(index)]"]
            if probe.hasAudio { hls += ["-map", "0:a:0"] }
            hls += [
                "-c:v:\(index)", "libx264", "-b:v:\(index)", "\(rendition.videoBitrate)", "-maxrate:v:\(index)", "\(rendition.videoBitrate * 107 / 100)",
                "-bufsize:v:\(index)", "\(rendition.videoBitrate * 3 / 2)",
            ]
            if probe.hasAudio { hls += ["-c:a:\(index)", "aac", "-b:a:\(index)", "\(rendition.audioBitrate)", "-ac:a:\(index)", "2"] }
            streams.append(probe.hasAudio ? "v:\(index),a:\(index),name:\(rendition.name)" : "v:\(index),name:\(rendition.name)")
        }
        hls += [
            "-preset", "veryfast", "-profile:v", "high", "-force_key_frames", "expr:gte(t,n_forced*\(segmentSeconds))", "-sc_threshold", "0",
            "-f", "hls", "-hls_time", "\(segmentSeconds)", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4", "-hls_flags", "independent_segments",
            "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename", output + "/%v/seg-%05d.m4s", "-master_pl_name", master,
            "-var_stream_map", streams.joined(separator: " "), output + "/%v/index.m3u8",
            "-map", "[board]", "-frames:v", "1", "-q:v", "5", output + "/" + storyboardImage,
        ]
        let top = renditions.last?.name ?? ""
        let mp4 = [
            "-nostdin", "-v", "error", "-y", "-protocol_whitelist", "file", "-format_whitelist", "hls,mov", "-i", "file:" + output + "/\(top)/index.m3u8",
            "-c", "copy", "-movflags", "+faststart", output + "/" + mp4,
        ]
        let at = String(format: "%.3f", min(probe.duration * 0.1, 10))
        let posterFrame =
            [
                "-nostdin", "-v", "error", "-y", "-ss", at,
            ] + untrusted(source) + [
                "-frames:v", "1", "-vf", "scale='min(1280,iw)':-2", "-q:v", "3", poster,
            ]
        return [hls, mp4, posterFrame]
    }

    /// Packages `source` (of `probe`, `bytes` long) into the directory `output` (made
    /// empty), with the poster beside it in `scratch`.
    package func package(
        _ source: String, probe: VideoProbe, bytes: Int, output: String, scratch: String, isCancelled: @escaping @Sendable () -> Bool = { false }
    ) throws -> PackagedVideo {
        let poster = scratch + "/poster.jpg"
        for rendition in Self.renditions(probe) {
            try? FileManager.default.createDirectory(atPath: output + "/" + rendition.name, withIntermediateDirectories: true)
        }
        let limits = Self.limits(duration: probe.duration, bytes: bytes)
        let steps = ["Packaging", "Writing the MP4", "Taking the poster frame"]
        for (step, arguments) in zip(steps, Self.commands(source: source, probe: probe, output: output, poster: poster)) {
            try Self.check(try LimitedProcess.run(ffmpeg, arguments, limits: limits, scratch: scratch, outputLimit: 0, isCancelled: isCancelled), what: step)
        }
        // A truncated source decodes to less than it claims.
        let renditions = Self.renditions(probe)
        let packaged = Self.playlistDuration(output + "/\(renditions.last?.name ?? "")/index.m3u8")
        if probe.duration > 2, packaged < probe.duration * 0.9 {
            throw VideoRefusal("The video is truncated: \(Int(packaged)) of the \(Int(probe.duration)) s it claims could be read.")
        }
        try Array(Self.storyboard(probe).utf8).write(to: output + "/" + Self.storyboardText)
        return PackagedVideo(posterPath: poster)
    }

    /// A run's outcome as a refusal when it failed.
    private static func check(_ run: LimitedProcess.Result, what: String) throws {
        let detail = run.errors.split(separator: "\n").last.map { ": " + Self.withoutPaths($0).prefix(300) } ?? ""
        switch run.outcome {
        case .exited(0): return
        case .exited: throw VideoRefusal("\(what) failed\(detail).")
        case .signaled(SIGXCPU): throw VideoRefusal("\(what) used more CPU time than a video of this length may.")
        case .signaled(SIGXFSZ): throw VideoRefusal("\(what) wrote a larger file than a video of this size may.")
        case let .signaled(signal): throw VideoRefusal("\(what) was stopped by signal \(signal) (a memory limit, most likely).")
        case .timedOut: throw VideoRefusal("\(what) took longer than a video of this length may.")
        case .cancelled: throw CancellationError()
        }
    }

    /// A line of ffmpeg's with each path in it cut to its file's name: a reason shown on
    /// the item never tells the server's folders.
    static func withoutPaths(_ line: Substring) -> String {
        line.split(separator: " ", omittingEmptySubsequences: false).map { word in
            guard word.contains("/") else { return String(word) }
            return String(word.split(separator: "/").last ?? "")
        }.joined(separator: " ")
    }

    /// The seconds between two storyboard thumbnails: one a second, or fewer for a long
    /// video (at most ``maxThumbnails`` in all).
    package static func storyboardInterval(_ duration: Double) -> Int {
        max(1, Int((duration / Double(maxThumbnails)).rounded(.up)))
    }

    static func thumbnailCount(_ duration: Double) -> Int {
        min(maxThumbnails, max(1, Int((duration / Double(storyboardInterval(duration))).rounded(.up))))
    }

    /// A thumbnail's height: the width's share of the picture's aspect, even.
    static func thumbnailHeight(_ probe: VideoProbe) -> Int {
        let height = thumbnailWidth * probe.height / max(1, probe.width)
        return max(2, height - height % 2)
    }

    /// The WebVTT file of the storyboard: a cue per thumbnail, naming its place in the sprite.
    package static func storyboard(_ probe: VideoProbe) -> String {
        let interval = storyboardInterval(probe.duration), height = thumbnailHeight(probe)
        var text = "WEBVTT\n"
        for index in 0..<thumbnailCount(probe.duration) {
            let start = Double(index * interval), end = min(Double((index + 1) * interval), probe.duration)
            guard start < probe.duration else { break }
            let x = (index % thumbnailsPerRow) * thumbnailWidth, y = (index / thumbnailsPerRow) * height
            text += "\n\(timestamp(start)) --> \(timestamp(end))\n\(storyboardImage)#xywh=\(x),\(y),\(thumbnailWidth),\(height)\n"
        }
        return text
    }

    private static func timestamp(_ seconds: Double) -> String {
        let milliseconds = Int((seconds * 1000).rounded())
        return String(format: "%02d:%02d:%02d.%03d", milliseconds / 3_600_000, milliseconds / 60_000 % 60, milliseconds / 1000 % 60, milliseconds % 1000)
    }

    /// The running time a media playlist lists (its `#EXTINF`s).
    static func playlistDuration(_ path: String) -> Double {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").reduce(0) { total, line in
            guard line.hasPrefix("#EXTINF:") else { return total }
            return total + (Double(line.dropFirst(8).prefix { $0 != "," }) ?? 0)
        }
    }
}

extension Array where Element == UInt8 {
    /// Writes the bytes to a new file at `path`.
    fileprivate func write(to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(self)) else { throw VideoRefusal("Cannot write \(path).") }
    }
}
