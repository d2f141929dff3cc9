import CatalogClient
import CatalogIdentity
import CatalogModels
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Hosted video against the real executable, killed outright: an upload killed mid-chunk
/// reports only what was durable and resumes from there to the very bytes sent, and a
/// server killed mid-job leaves its job (and no ffmpeg) behind, run again at the next start.
@Suite struct VideoKillTests {
    @Test func anUploadAndAJobSurviveKill9() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-video-kill-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("catalog.sqlite").path
        let key = try await Executables.bootstrapKey(database: database)
        let arguments = ["--database", database, "--migrations", migrationsDirectory.path, "--no-seed"]
        var server = try await ServerProcess(arguments + ["--video-workers", "0"], log: directory.appendingPathComponent("server-1.log"), key: key)
        let clip = try await TestVideos.clip(seconds: 8, width: 1280, height: 720)
        let bytes = try Data(contentsOf: clip)
        let api = CatalogClient(baseURL: server.client.baseURL, credentials: .apiKey(key), timeout: 10)
        let item = try await api.playableItems.create(PlayableItemInput(title: "Killed", streamURL: URL(string: "https://example.com/k")!)).value.id
        let path = try await api.videos.start(clip, for: item)
        // A third, acknowledged; then the rest, killed mid-chunk.
        let third = bytes.count / 3
        let first = try await server.client.send(
            "PATCH", path, headers: ["Tus-Resumable": "1.0.0", "Content-Type": "application/offset+octet-stream", "Upload-Offset": "0"], body: bytes.prefix(third))
        #expect(first.status == 204 && first.header("Upload-Offset") == "\(third)")
        let port = server.port
        // The connection stays open through the kill (closed first, its bytes would be kept as a cut-off body's).
        let socket = try await onThread {
            let socket = try Loopback.connect(port: port)
            let head =
                "PATCH \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(key)\r\nTus-Resumable: 1.0.0\r\n"
                + "Content-Type: application/offset+octet-stream\r\nUpload-Offset: \(third)\r\nContent-Length: \(bytes.count - third)\r\n\r\n"
            let sent = Array(head.utf8) + Array(bytes[third..<(third + (bytes.count - third) / 2)])
            _ = sent.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            usleep(300_000)  // the bytes reach the upload's file, unsynced
            return socket
        }
        server.kill9()
        close(socket)
        // Started again: the offset is what was acknowledged, and the upload goes on from it.
        server = try await ServerProcess(arguments + ["--video-workers", "1"], log: directory.appendingPathComponent("server-2.log"), key: key)
        let again = CatalogClient(baseURL: server.client.baseURL, credentials: .apiKey(key), timeout: 10)
        let offset = try await again.videos.offset(of: path)
        #expect(offset.offset == Int64(third) && offset.length == Int64(bytes.count), "\(offset) after \(third) of \(bytes.count)")
        try await again.videos.resume(clip, at: path, chunkSize: 1 << 16)
        let id = String(path.split(separator: "/").last ?? "")
        // The job is running (its ffmpeg is): killed with it, then done at the next start.
        // (Up to 20 s for the worker to start it: the whole suite beside it can delay it past 5.)
        var running = false
        for _ in 0..<800 where !running {
            running = try await onThread { try runCommand("/usr/bin/pgrep", ["-f", "videos/\(id)/source"]).status == 0 }
            if !running { try await Task.sleep(for: .milliseconds(25)) }
        }
        #expect(running, "ffmpeg ran the job")
        server.kill9()
        // The kernel kills ffmpeg when the server dies (PR_SET_PDEATHSIG); its exit is not instant
        // on a loaded machine, so it gets up to 10 s to be gone.
        var outlived = true
        for _ in 0..<400 where outlived {
            outlived = try await onThread { try runCommand("/usr/bin/pgrep", ["-f", "videos/\(id)/source"]).status == 0 }
            if outlived { try await Task.sleep(for: .milliseconds(25)) }
        }
        #expect(!outlived, "no ffmpeg outlived the server")
        server = try await ServerProcess(arguments + ["--video-workers", "1"], log: directory.appendingPathComponent("server-3.log"), key: key)
        var video: Video?
        for _ in 0..<600 where video?.status != .ready {
            video = try await server.client.get("/v1/playable-items/\(item)").decode(PlayableItem.self).video
            if video?.status != .ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(video?.status == .ready, "\(String(describing: video))")
        // The source is byte for byte what was sent.
        let source = directory.appendingPathComponent("media/videos/\(id)/source")
        #expect(Crypto.sha256(Array(try Data(contentsOf: source))) == Crypto.sha256(Array(bytes)))
        let renditions = try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("media/videos/\(id)/media").path).sorted()
        #expect(renditions == ["360p", "720p", "master.m3u8", "storyboard.jpg", "storyboard.vtt", "video.mp4"])
        // The run the kill cut short left no scratch behind once the job ran again.
        let scratch = try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("media/.incoming").path)
        #expect(!scratch.contains { $0.hasPrefix("job-") }, "\(scratch)")
        withExtendedLifetime(server) {}
    }
}
