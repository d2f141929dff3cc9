import Foundation
import Synchronization
import TestSupport

/// Videos made by the tests themselves with ffmpeg (`-f lavfi testsrc`), never downloaded:
/// a clip of a given length, size and sound, made once per run and kept for the others.
package enum TestVideos {
    private static let made = Mutex<[String: URL]>([:])
    private static let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-test-videos-\(getpid())")

    /// An H.264/AAC MP4 of `seconds`, `width` × `height` (with a sine tone when `audio`),
    /// faststart; `noisy` makes it lossless noise, about 14 MB a second at 640×360 (a large
    /// file, made fast).
    /// (Made on a thread of its own: ffmpeg is waited for there, never on the tasks' shared threads.)
    package static func clip(seconds: Int = 2, width: Int = 320, height: Int = 180, audio: Bool = true, noisy: Bool = false) async throws -> URL {
        try await onThread { try clipNow(seconds: seconds, width: width, height: height, audio: audio, noisy: noisy) }
    }

    private static func clipNow(seconds: Int, width: Int, height: Int, audio: Bool, noisy: Bool) throws -> URL {
        let name = "clip-\(seconds)s-\(width)x\(height)\(audio ? "-audio" : "")\(noisy ? "-noisy" : "").mp4"
        // One maker at a time: tests running at once ask for the same clips.
        return try made.withLock { made in
            if let url = made[name] { return url }
            let url = try make(name, seconds: seconds, width: width, height: height, audio: audio, noisy: noisy)
            made[name] = url
            return url
        }
    }

    private static func make(_ name: String, seconds: Int, width: Int, height: Int, audio: Bool, noisy: Bool) throws -> URL {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent(name)
        var arguments = ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=\(width)x\(height):rate=25:duration=\(seconds)"]
        if audio { arguments += ["-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)"] }
        // faststart: the index first, so a truncated copy still says how long it claims to be.
        if noisy { arguments += ["-vf", "noise=alls=60:allf=t+u", "-qp", "0"] }
        arguments += ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-movflags", "+faststart"]
        if audio { arguments += ["-c:a", "aac", "-shortest"] }
        try run("ffmpeg", arguments + [url.path])
        return url
    }

    /// Runs `program` with `arguments`, failing when it does not exit with 0.
    package static func run(_ program: String, _ arguments: [String]) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [program] + arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(program) exited with \(process.terminationStatus)"])
        }
    }
}
