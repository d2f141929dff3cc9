import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// Hosted video end to end, against a real server on a loopback port: uploads through
/// the reference tus client (tuspy), resumed after a cut connection; the IETF draft's
/// 104; checksums, offsets, limits, ownership and expiry; processing with the real
/// ffprobe and ffmpeg of generated clips (and of files that are not video); and playback
/// checked by curl (every range case) and by ffmpeg decoding every HLS rendition over HTTP.
@Suite struct VideoTests {
    static let tus = ["Tus-Resumable": "1.0.0"]

    /// Creates an item and a tus upload of `length` bytes for it, as `client`.
    static func createUpload(_ catalog: TestCatalog, length: Int, client: APIClient? = nil) async throws -> (item: CatalogID, upload: String) {
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Hosted", streamURL: URL(string: "https://example.com/v")!)).value.id
        let created = try await (client ?? catalog.client).send("POST", "/v1/playable-items/\(item)/video", headers: tus.merging(["Upload-Length": "\(length)"]) { $1 })
        #expect(created.status == 201, "\(created.text)")
        #expect(created.header("Tus-Resumable") == "1.0.0")
        return (item, try #require(created.header("Location")))
    }

    /// The item `id` as it is now.
    static func item(_ catalog: TestCatalog, _ id: CatalogID) async throws -> PlayableItem {
        try await catalog.client.get("/v1/playable-items/\(id)").decode(PlayableItem.self)
    }

    /// Runs tuspy's script `script` with the arguments, as the admin; its output.
    static func tuspy(_ catalog: TestCatalog, _ script: String, _ arguments: [String]) async throws -> String {
        let run = try await onThread { try runCommand("/usr/bin/env", ["python3", "-c", script, catalog.client.baseURL.absoluteString, catalog.adminKey] + arguments) }
        #expect(run.status == 0, "\(run.output)")
        return run.output
    }

    /// tuspy: creates an upload of the file for the item, sends its first half in a PATCH
    /// whose connection is cut halfway (a raw socket, closed), waits until the server has
    /// kept what arrived, then resumes with a new uploader on the upload's URL (a HEAD,
    /// then PATCHes of 64 KiB), as an app does after it was killed.
    static let cutAndResume = """
        import sys, socket, urllib.parse
        from tusclient import client
        base, key, item, path = sys.argv[1:5]
        tus = client.TusClient(base + "/v1/playable-items/" + item + "/video", headers={"Authorization": "Bearer " + key})
        data = open(path, "rb").read()
        uploader = tus.uploader(path, chunk_size=65536, metadata={"filename": "clip.mp4"})
        uploader.set_url(uploader.create_url())
        url = urllib.parse.urlparse(uploader.url)
        half = len(data) // 2
        sock = socket.create_connection((url.hostname, url.port))
        head = ("PATCH %s HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer %s\\r\\nTus-Resumable: 1.0.0\\r\\n"
                "Content-Type: application/offset+octet-stream\\r\\nUpload-Offset: 0\\r\\nContent-Length: %d\\r\\n\\r\\n") % (url.path, key, half)
        sock.sendall(head.encode() + data[: half // 2])
        sock.close()
        # The server keeps what arrived once it sees the connection end (a moment later).
        import time, requests
        for _ in range(50):
            answer = requests.head(uploader.url, headers={"Authorization": "Bearer " + key, "Tus-Resumable": "1.0.0"})
            if int(answer.headers["Upload-Offset"]) > 0:
                break
            time.sleep(0.1)
        resumed = tus.uploader(path, url=uploader.url, chunk_size=65536)
        print("resumed-from", resumed.offset)
        resumed.upload()
        print("offset", resumed.offset, "of", len(data), "url", uploader.url)
        """

    @Test(arguments: TestEngine.all) func aTusUploadCutOffResumesAndTheVideoPlaysOverHTTP(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false) { $0.publicURL = "http://127.0.0.1:1" }
            let clip = try await TestVideos.clip(seconds: 5, width: 640, height: 360)
            let bytes = try Data(contentsOf: clip)
            let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Clip", streamURL: URL(string: "https://example.com/v")!)).value.id
            let output = try await Self.tuspy(catalog, Self.cutAndResume, [item.rawValue, clip.path])
            // The cut PATCH kept what arrived (a quarter of the file, or less): tuspy resumed from there.
            let resumed = try #require(output.split(separator: "\n").first { $0.hasPrefix("resumed-from") }.flatMap { Int($0.split(separator: " ")[1]) })
            #expect(resumed > 0 && resumed <= bytes.count / 4, "\(output)")
            #expect(output.contains("offset \(bytes.count) of \(bytes.count)"), "\(output)")
            var shown = try await Self.item(catalog, item)
            #expect(shown.video?.status == .processing)
            #expect(try await catalog.processVideos() == 1)
            shown = try await Self.item(catalog, item)
            let video = try #require(shown.video)
            #expect(video.status == .ready, "\(video)")
            #expect(video.width == 640 && video.height == 360)
            #expect(abs((video.durationSeconds ?? 0) - 5) < 0.2)
            #expect(shown.durationSeconds == video.durationSeconds)
            // Each step of the video was a change of the item, in the change feed.
            let feed = try await catalog.client.get("/v1/changes?limit=100")
            let changes = try #require(try JSONSerialization.jsonObject(with: feed.body) as? [String: Any])["changes"] as? [[String: Any]]
            let statuses = (changes ?? []).filter { $0["id"] as? String == item.rawValue }.compactMap {
                (($0["resource"] as? [String: Any])?["video"] as? [String: Any])?["status"] as? String
            }
            #expect(statuses.last == "ready", "\(statuses)")
            // With a public URL, the item streams from its HLS playlist.
            #expect(shown.streamURL.absoluteString == "http://127.0.0.1:1" + (video.hls ?? "-"))
            let poster = try #require(video.poster)
            #expect(poster.width == 640 && poster.height == 360)
            #expect(try await catalog.anonymous.get(poster.url).status == 200)

            // Every rendition decodes over HTTP (360p only: the source is 360p).
            let base = catalog.client.baseURL.absoluteString
            let master = try await catalog.anonymous.get(try #require(video.hls))
            #expect(master.header("Content-Type") == "application/vnd.apple.mpegurl")
            #expect(master.text.contains("360p/index.m3u8") && !master.text.contains("720p"))
            let decoded = try await onThread { try runCommand("/usr/bin/env", ["ffmpeg", "-v", "error", "-i", base + (video.hls ?? ""), "-map", "0", "-f", "null", "-"]) }
            #expect(decoded.status == 0 && decoded.output.isEmpty, "\(decoded.output)")
            let storyboard = try await catalog.anonymous.get(try #require(video.storyboard))
            #expect(storyboard.header("Content-Type") == "text/vtt; charset=utf-8")
            #expect(storyboard.text.hasPrefix("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nstoryboard.jpg#xywh=0,0,160,90\n"))
            let segment = try await catalog.anonymous.get(video.hls!.replacingOccurrences(of: "master.m3u8", with: "360p/seg-00000.m4s"))
            #expect(segment.status == 200 && segment.header("Content-Type") == "video/iso.segment")
            #expect(segment.header("Cache-Control") == "public, max-age=31536000, immutable")
            #expect(segment.header("X-Content-Type-Options") == "nosniff")
            try await Self.checkRanges(base + (video.mp4 ?? ""))

            // Deleting the item releases the video: its files go with the sweep.
            #expect(try await catalog.client.send("DELETE", "/v1/playable-items/\(item)").status == 204)
            try await catalog.sweepVideos()
            #expect(try await catalog.anonymous.get(video.mp4!).status == 404)
            #expect(!FileManager.default.fileExists(atPath: catalog.directory.appendingPathComponent("media/videos/\(video.id)").path))
        }
    }

    /// Every range case of RFC 9110 against the MP4 at `url`, with curl.
    static func checkRanges(_ url: String) async throws {
        func curl(_ arguments: [String]) async throws -> (head: String, body: Int) {
            let output = try await onThread { try runCommand("/usr/bin/env", ["curl", "-s", "-D", "-", "-o", "/dev/null", "-w", "\n%{size_download}"] + arguments + [url]) }
            let lines = output.output.split(separator: "\n", omittingEmptySubsequences: false)
            return (lines.dropLast().joined(separator: "\n"), Int(lines.last ?? "") ?? -1)
        }
        let whole = try await curl([])
        #expect(whole.head.hasPrefix("HTTP/1.1 200 OK"))
        #expect(whole.head.contains("Accept-Ranges: bytes") && whole.head.contains("Content-Type: video/mp4"))
        let size = whole.body
        #expect(size > 1000)
        let etag = try #require(whole.head.split(separator: "\r\n").first { $0.hasPrefix("ETag: ") }.map { String($0.dropFirst(6)) })
        // AVPlayer's probe.
        let probe = try await curl(["-H", "Range: bytes=0-1"])
        #expect(probe.head.hasPrefix("HTTP/1.1 206 Partial Content") && probe.head.contains("Content-Range: bytes 0-1/\(size)") && probe.body == 2)
        let middle = try await curl(["-H", "Range: bytes=100-199"])
        #expect(middle.head.contains("Content-Range: bytes 100-199/\(size)") && middle.head.contains("Content-Length: 100") && middle.body == 100)
        let open = try await curl(["-H", "Range: bytes=\(size - 10)-"])
        #expect(open.head.contains("Content-Range: bytes \(size - 10)-\(size - 1)/\(size)") && open.body == 10)
        let suffix = try await curl(["-H", "Range: bytes=-7"])
        #expect(suffix.head.contains("Content-Range: bytes \(size - 7)-\(size - 1)/\(size)") && suffix.body == 7)
        let past = try await curl(["-H", "Range: bytes=\(size + 5)-"])
        #expect(past.head.hasPrefix("HTTP/1.1 416") && past.head.contains("Content-Range: bytes */\(size)"))
        let clamped = try await curl(["-H", "Range: bytes=0-99999999999999999999"])
        #expect(clamped.head.contains("Content-Range: bytes 0-\(size - 1)/\(size)") && clamped.body == size)
        // Several ranges, or a unit the server does not know: the whole file.
        #expect(try await curl(["-H", "Range: bytes=0-1,5-6"]).head.hasPrefix("HTTP/1.1 200 OK"))
        #expect(try await curl(["-H", "Range: items=0-1"]).head.hasPrefix("HTTP/1.1 200 OK"))
        #expect(try await curl(["-H", "Range: bytes=0-1", "-H", "If-Range: \(etag)"]).head.hasPrefix("HTTP/1.1 206"))
        #expect(try await curl(["-H", "Range: bytes=0-1", "-H", "If-Range: \"other\""]).head.hasPrefix("HTTP/1.1 200 OK"))
        #expect(try await curl(["-H", "If-None-Match: \(etag)"]).head.hasPrefix("HTTP/1.1 304"))
        let head = try await curl(["-I"])
        #expect(head.head.hasPrefix("HTTP/1.1 200 OK") && head.head.contains("Content-Length: \(size)") && head.body == 0)
        // Keep-alive: two ranges on one connection, each exact.
        let twice = try await onThread {
            let format = "%{http_code} %{size_download} %{num_connects}\n"
            return try runCommand(
                "/usr/bin/env", ["curl", "-s", "-o", "/dev/null", "-w", format, "-r", "0-9", url, "--next", "-s", "-o", "/dev/null", "-w", format, "-r", "10-29", url])
        }
        #expect(twice.output == "206 10 1\n206 20 0\n", "\(twice.output)")
    }

    @Test func aChecksumOrOffsetThatIsWrongKeepsNothing() async throws {
        let catalog = try TestCatalog(seed: false)
        let (_, upload) = try await Self.createUpload(catalog, length: 10)
        let chunk = Data("abcdef".utf8)
        func patch(_ offset: Int, _ body: Data, _ extra: [String: String] = [:]) async throws -> APIResponse {
            try await catalog.client.send(
                "PATCH", upload, headers: Self.tus.merging(["Content-Type": "application/offset+octet-stream", "Upload-Offset": "\(offset)"]) { $1 }.merging(extra) { $1 },
                body: body)
        }
        let wrong = try await patch(0, chunk, ["Upload-Checksum": "sha256 " + Data(Crypto.sha256(Array("other".utf8))).base64EncodedString()])
        #expect(wrong.status == 460 && wrong.problem?.code == "checksumMismatch")
        #expect(try await catalog.client.send("HEAD", upload, headers: Self.tus).header("Upload-Offset") == "0")
        let right = try await patch(0, chunk, ["Upload-Checksum": "sha256 " + Data(Crypto.sha256(Array(chunk))).base64EncodedString()])
        #expect(right.status == 204 && right.header("Upload-Offset") == "6" && right.header("Upload-Expires") != nil)
        let unknown = try await patch(6, chunk.prefix(4), ["Upload-Checksum": "md5 AAAA"])
        #expect(unknown.status == 400 && unknown.header("Tus-Checksum-Algorithm") == "sha1,sha256")
        let behind = try await patch(2, chunk.prefix(4))
        #expect(behind.status == 409 && behind.header("Upload-Offset") == "6" && behind.problem?.code == "mismatchingUploadOffset")
        let past = try await patch(6, chunk)
        #expect(past.status == 413)
        let plain = try await catalog.client.send("PATCH", upload, headers: Self.tus.merging(["Upload-Offset": "6"]) { $1 }, body: chunk.prefix(4))
        #expect(plain.status == 415)
        let old = try await catalog.client.send("HEAD", upload, headers: ["Tus-Resumable": "0.2.2"])
        #expect(old.status == 412 && old.header("Tus-Version") == "1.0.0")
        let sha1 = try await patch(6, chunk.prefix(4), ["Upload-Checksum": "sha1 " + Self.sha1Base64(Array(chunk.prefix(4)))])
        #expect(sha1.status == 204 && sha1.header("Upload-Offset") == "10")
        // Complete: its job is queued, and no byte more is taken.
        #expect(try await patch(10, Data("x".utf8)).status == 413)
        let done = try await patch(10, Data())
        #expect(done.status == 409 && done.problem?.code == "completedUpload" && done.header("Upload-Offset") == "10")
        let options = try await catalog.anonymous.send("OPTIONS", upload)
        #expect(options.header("Tus-Version") == "1.0.0" && options.header("Tus-Extension")?.contains("checksum") == true)
        #expect(options.header("Tus-Max-Size") == String(VideoRules.defaultMaxBytes))
    }

    static func sha1Base64(_ bytes: [UInt8]) -> String {
        let digest = RunningDigest(.sha1)
        bytes.withUnsafeBytes { digest.update($0) }
        return Data(digest.finish()).base64EncodedString()
    }

    @Test func uploadsAreTheirUploadersAndBounded() async throws {
        let catalog = try TestCatalog(seed: false) {
            $0.videoMaxBytes = 1000
            $0.videoQuotaBytes = 1500
        }
        let editor = try catalog.user("Editor", role: .editor), other = try catalog.user("Other editor", role: .editor)
        let (item, upload) = try await Self.createUpload(catalog, length: 1000, client: catalog.client(key: editor.key))
        #expect(try await catalog.client(key: other.key).send("HEAD", upload, headers: Self.tus).status == 404)
        #expect(try await catalog.client(key: other.key).send("DELETE", upload, headers: Self.tus).status == 404)
        #expect(try await catalog.client.send("HEAD", upload, headers: Self.tus).status == 200)  // an admin's
        let tooLarge = try await catalog.client(key: editor.key).send("POST", "/v1/playable-items/\(item)/video", headers: Self.tus.merging(["Upload-Length": "1001"]) { $1 })
        #expect(tooLarge.status == 413)
        let overQuota = try await catalog.client(key: editor.key).send(
            "POST",
            "/v1/playable-items/\(try await catalog.api.playableItems.create(PlayableItemInput(title: "B", streamURL: URL(string: "https://example.com/b")!)).value.id)/video",
            headers: Self.tus.merging(["Upload-Length": "600"]) { $1 })
        #expect(overQuota.status == 409 && overQuota.problem?.code == "quotaExceeded", "\(overQuota.text)")
        // Cancelled: gone, and the item shows no video.
        #expect(try await catalog.client(key: editor.key).send("DELETE", upload, headers: Self.tus).status == 204)
        // 410 while its row is kept; 404 once the sweep (each minute) forgot it: tus allows either.
        #expect([410, 404].contains(try await catalog.client(key: editor.key).send("HEAD", upload, headers: Self.tus).status))
        #expect(try await Self.item(catalog, item).video == nil)
        // Expired: gone, and the item says why.
        let (expiring, late) = try await Self.createUpload(catalog, length: 10)
        _ = try catalog.application.store.videos.expire(now: Timestamp.milliseconds(Date()) + 86_400_001)
        #expect([410, 404].contains(try await catalog.client.send("HEAD", late, headers: Self.tus).status))
        #expect(try await Self.item(catalog, expiring).video?.status == .failed)
        #expect(try await Self.item(catalog, expiring).video?.error == "The upload expired before it finished.")
    }

    @Test func theDraftsCreationAnnouncesItsUploadBeforeItsBody() async throws {
        let catalog = try TestCatalog(seed: false)
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Draft", streamURL: URL(string: "https://example.com/d")!)).value.id
        let port = try #require(catalog.client.baseURL.port)
        for version in [3, 6, 8] {
            let complete = version == 3 ? "Upload-Incomplete: ?1" : "Upload-Complete: ?0"
            let request =
                "POST /v1/playable-items/\(item)/video HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(catalog.adminKey)\r\nUpload-Draft-Interop-Version: \(version)\r\n"
                + "\(complete)\r\nUpload-Length: 8\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
            let answer = try await Loopback.exchange(port: port, Array(request.utf8))
            #expect(answer.hasPrefix("HTTP/1.1 104 Upload Resumption Supported\r\nLocation: /v1/uploads/"), "\(answer)")
            #expect(answer.contains("\r\n\r\nHTTP/1.1 201 Created\r\n"), "\(answer)")
            let location = try #require(answer.split(separator: "\r\n").first { $0.hasPrefix("Location: ") }.map { String($0.dropFirst(10)) })
            let interop = ["Upload-Draft-Interop-Version": "\(version)"]
            let offset = try await catalog.client.send("HEAD", location, headers: interop)
            #expect(offset.status == 204 && offset.header("Upload-Offset") == "5" && offset.header("Cache-Control") == "no-store")
            #expect(offset.header(version == 3 ? "Upload-Incomplete" : "Upload-Complete") == (version == 3 ? "?1" : "?0"))
            let type = version >= 6 ? "application/partial-upload" : "application/octet-stream"
            let last = try await catalog.client.send(
                "PATCH", location,
                headers: interop.merging(["Upload-Offset": "5", "Content-Type": type, version == 3 ? "Upload-Incomplete" : "Upload-Complete": version == 3 ? "?0" : "?1"]) {
                    $1
                }, body: Data("abc".utf8))
            #expect(last.status == 204 && last.header("Upload-Offset") == "8", "\(last.text)")
        }
        // A plain body (curl -T): the whole video in one request, its length its Content-Length.
        let clip = try await TestVideos.clip(seconds: 1, width: 320, height: 180)
        let plain = try await onThread {
            try runCommand(
                "/usr/bin/env",
                [
                    "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer \(catalog.adminKey)", "-T", clip.path, "-X", "POST",
                    catalog.client.baseURL.absoluteString + "/v1/playable-items/\(item)/video",
                ])
        }
        #expect(plain.output == "201")
        try await catalog.processVideos()
        #expect(try await Self.item(catalog, item).video?.status == .ready)
    }

    @Test func aFileThatIsNotAVideoPlayableFailsWithAReason() async throws {
        let catalog = try TestCatalog(seed: false)
        let clip = try Data(contentsOf: try await TestVideos.clip(seconds: 4, width: 320, height: 180))
        // 10,000 × 10,000 claimed by a YUV4MPEG2 header, with one row of data.
        let absurd = Data("YUV4MPEG2 W10000 H10000 F25:1 Ip A1:1 C420jpeg\nFRAME\n".utf8) + Data(count: 10_000)
        let cases: [(Data, String)] = [
            (Data("not a video, just text".utf8), "not a video"),
            // An image is no container of video the server reads.
            (Data(TestImages.png(width: 64, height: 64)), "not a video"),
            (absurd, "claims 10000×10000 pixels"),
            (clip.prefix(clip.count / 2), "truncated"),
        ]
        for (bytes, reason) in cases {
            let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Bad", streamURL: URL(string: "https://example.com/b")!)).value.id
            let created = try await catalog.client.send("POST", "/v1/playable-items/\(item)/video", headers: ["Content-Type": "application/octet-stream"], body: bytes)
            #expect(created.status == 201)
            try await catalog.processVideos()
            let video = try #require(try await Self.item(catalog, item).video)
            #expect(video.status == .failed)
            #expect(video.error?.contains(reason) == true, "\(reason): \(video.error ?? "-")")
            #expect(video.error?.contains("/tmp") == false, "no server path: \(video.error ?? "-")")
        }
        // The server is unaffected.
        #expect(try await catalog.anonymous.get("/healthz").status == 200)
    }

    static let s3Endpoint = ProcessInfo.processInfo.environment["CATALOG_TEST_S3_ENDPOINT"]

    @Test(.enabled(if: s3Endpoint != nil, "needs CATALOG_TEST_S3_ENDPOINT (.ci/s3.sh)")) func onS3AnUploadIsAMultipartUploadAndPlayersAreRedirected() async throws {
        let endpoint = try #require(Self.s3Endpoint)
        let credentials = ["AWS_ACCESS_KEY_ID": "catalog", "AWS_SECRET_ACCESS_KEY": "catalog-secret"]
        let address = "s3://catalog-tests/videos-\(UUID().uuidString.lowercased())?endpoint=\(endpoint)"
        try S3MediaStore(S3MediaStore.Address(address), environment: credentials).createBucket()
        let catalog = try TestCatalog(seed: false) {
            $0.mediaStore = address
            $0.mediaStoreEnvironment = credentials
        }
        // About 18 MB, sent by the client library in appends of 5 MiB: parts of 8 MiB go to
        // the store as they fill, the rest waits as a tail object between appends.
        let clip = try await TestVideos.clip(seconds: 2, width: 640, height: 360, audio: false, noisy: true)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: clip.path)[.size] as? Int)
        #expect(size > 16 << 20)
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "On S3", streamURL: URL(string: "https://example.com/s")!)).value.id
        let reports = Mutex<[Int64]>([])
        let path = try await catalog.api.videos.upload(clip, for: item, chunkSize: 5 << 20) { sent, _ in reports.withLock { $0.append(sent) } }
        #expect(reports.withLock { $0 }.last == Int64(size))
        #expect(try await catalog.api.videos.offset(of: path) == (Int64(size), Int64(size)))
        #expect(try await catalog.processVideos() == 1)
        let video = try #require(try await Self.item(catalog, item).video)
        #expect(video.status == .ready, "\(video)")
        // Media files: a redirect to a presigned URL, which serves ranges itself.
        let mp4 = try await onThread {
            try runCommand("/usr/bin/env", ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", catalog.client.baseURL.absoluteString + (video.mp4 ?? "")])
        }
        #expect(mp4.output.hasPrefix("302 "), "\(mp4.output)")
        let presigned = String(mp4.output.dropFirst(4))
        #expect(presigned.hasPrefix(endpoint) && presigned.contains("X-Amz-Signature="))
        let ranged = try await onThread { try runCommand("/usr/bin/env", ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-r", "0-1", presigned]) }
        #expect(ranged.output == "206 2", "\(ranged.output)")
        // Playlists come from the server, so the paths in them stay its own.
        let master = try await catalog.anonymous.get(try #require(video.hls))
        #expect(master.status == 200 && master.text.contains("360p/index.m3u8"))
        let decoded = try await onThread {
            try runCommand("/usr/bin/env", ["ffmpeg", "-v", "error", "-i", catalog.client.baseURL.absoluteString + (video.hls ?? ""), "-map", "0", "-f", "null", "-"])
        }
        #expect(decoded.status == 0, "\(decoded.output)")
        // Released with its item: the objects go.
        #expect(try await catalog.client.send("DELETE", "/v1/playable-items/\(item)").status == 204)
        try await catalog.sweepVideos()
        let left = try S3MediaStore(S3MediaStore.Address(address), environment: credentials).list(prefix: "videos/\(video.id)/")
        #expect(left.isEmpty, "\(left.map(\.key))")
    }

    /// The token of video `id` expiring at `expires`, made as the server makes it (so the
    /// format the contract describes is checked too).
    static func token(_ id: String, expires: Int, key: [UInt8]) -> String {
        let mac = Crypto.hmacSHA256(key: key, Array("\(id).\(expires)".utf8)).prefix(18)
        return "s\(expires)." + Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    @Test func withSignedPlaybackOnlySignedPathsPlay() async throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("playback-key-\(UUID().uuidString)")
        let firstKey = try Crypto.randomBytes(32)
        try Data(firstKey).write(to: keyFile)
        let catalog = try TestCatalog(seed: false) {
            $0.requireSignedPlayback = true
            $0.playbackKeyFile = keyFile.path
            $0.publicURL = "https://videos.example.com"
        }
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Signed", streamURL: URL(string: "https://example.com/s")!)).value.id
        let clip = try Data(contentsOf: try await TestVideos.clip(seconds: 2, width: 320, height: 180))
        #expect(try await catalog.client.send("POST", "/v1/playable-items/\(item)/video", headers: ["Content-Type": "application/octet-stream"], body: clip).status == 201)
        try await catalog.processVideos()
        let shown = try await catalog.anonymous.get("/v1/playable-items/\(item)")
        let video = try #require(try shown.decode(PlayableItem.self).video)
        let hls = try #require(video.hls)
        // Every media path the document shows is signed, the stream URL's too.
        #expect(!shown.text.contains("/media/"), "\(shown.text)")
        let signed = try #require(hls.split(separator: "/").dropFirst(3).first.map(String.init))
        #expect(hls == "/v1/videos/\(video.id)/\(signed)/master.m3u8")
        #expect(try shown.decode(PlayableItem.self).streamURL.absoluteString == "https://videos.example.com" + hls)
        #expect(video.mp4?.contains(signed) == true && video.storyboard?.contains(signed) == true)
        // Text a client wrote is never signed (nor changed), though it names the same path.
        let quoting = try await catalog.client.send(
            "POST", "/v1/playable-items", json: ["title": "Quote", "description": "See /v1/videos/\(video.id)/media/master.m3u8", "streamURL": "https://example.com/q"])
        #expect(try quoting.decode(PlayableItem.self).description == "See /v1/videos/\(video.id)/media/master.m3u8")
        // The list shows the path signed too (its token may be of the next quarter, when one began meanwhile).
        let list = try await catalog.anonymous.get("/v1/playable-items").text
        let signedInList = try Regex("\"/v1/videos/\(video.id)/s[0-9]+\\.[A-Za-z0-9_-]+/master\\.m3u8\"")
        #expect(list.contains("See /v1/videos/\(video.id)/media/master.m3u8") && list.contains(signedInList))
        let master = try await catalog.anonymous.get(hls)
        #expect(master.status == 200 && master.header("Cache-Control")?.hasPrefix("private, max-age=") == true)
        let decoded = try await onThread {
            try runCommand("/usr/bin/env", ["ffmpeg", "-v", "error", "-i", catalog.client.baseURL.absoluteString + hls, "-map", "0", "-f", "null", "-"])
        }
        #expect(decoded.status == 0, "segments inherit the signature: \(decoded.output)")
        let unsigned = try await catalog.anonymous.get("/v1/videos/\(video.id)/media/master.m3u8")
        #expect(unsigned.status == 403 && unsigned.problem?.code == "signedPlaybackRequired")
        let now = Int(Date().timeIntervalSince1970)
        let expired = Self.token(video.id, expires: now - 1, key: firstKey)
        #expect(try await catalog.anonymous.get("/v1/videos/\(video.id)/\(expired)/master.m3u8").problem?.code == "invalidPlaybackSignature")
        let forged = Self.token(video.id, expires: now + 600, key: try Crypto.randomBytes(32))
        #expect(try await catalog.anonymous.get("/v1/videos/\(video.id)/\(forged)/master.m3u8").status == 403)
        let otherVideo = Self.token(String(repeating: "a", count: 32), expires: now + 600, key: firstKey)
        #expect(try await catalog.anonymous.get("/v1/videos/\(video.id)/\(otherVideo)/master.m3u8").status == 403)
        let made = Self.token(video.id, expires: now + 600, key: firstKey)
        #expect(try await catalog.anonymous.get("/v1/videos/\(video.id)/\(made)/master.m3u8").status == 200)
        // Rotated: the previous key still signs valid paths; rotated again, no more.
        try Data(try Crypto.randomBytes(32)).write(to: keyFile)
        try catalog.application.rotatePlaybackKey()
        #expect(try await catalog.anonymous.get(hls).status == 200)
        try Data(try Crypto.randomBytes(32)).write(to: keyFile)
        try catalog.application.rotatePlaybackKey()
        #expect(try await catalog.anonymous.get(hls).status == 403)
        let fresh = try #require(try await catalog.anonymous.get("/v1/playable-items/\(item)").decode(PlayableItem.self).video?.hls)
        #expect(fresh != hls)
        let freshStatus = try await catalog.anonymous.get(fresh).status
        #expect(freshStatus == 200)
    }

    @Test func aBrowserPlaysTheMP4AndSeeksWithRanges() async throws {
        let catalog = try TestCatalog(seed: false)
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Browser", streamURL: URL(string: "https://example.com/b")!)).value.id
        let clip = try Data(contentsOf: try await TestVideos.clip(seconds: 10, width: 640, height: 360))
        #expect(try await catalog.client.send("POST", "/v1/playable-items/\(item)/video", headers: ["Content-Type": "application/octet-stream"], body: clip).status == 201)
        try await catalog.processVideos()
        let mp4 = try #require(try await Self.item(catalog, item).video?.mp4)
        // A page that loads the MP4, seeks to 6 s, and says where it got in its title.
        let page = catalog.directory.appendingPathComponent("player.html")
        try Data(
            """
            <html><head><title>loading</title></head><body><video id="v" muted preload="auto"></video><script>
            const v = document.getElementById('v');
            v.onerror = () => { document.title = 'error ' + (v.error && v.error.code); };
            v.onloadedmetadata = () => { v.currentTime = 6; };
            v.onseeked = () => { document.title = 'seeked ' + v.currentTime.toFixed(1) + ' of ' + v.duration.toFixed(1) + ' at ' + v.videoWidth; };
            v.src = '\(catalog.client.baseURL.absoluteString + mp4)';
            </script></body></html>
            """.utf8
        ).write(to: page)
        let browser = try await onThread {
            try runCommand(
                "/usr/bin/env",
                [
                    "chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + catalog.directory.appendingPathComponent("chromium").path,
                    "--virtual-time-budget=15000", "--dump-dom", page.absoluteString,
                ])
        }
        #expect(browser.output.contains("<title>seeked 6.0 of 10.0 at 640</title>"), "\(browser.output.suffix(2000))")
        // It asked for ranges, and got them.
        let metrics = try await catalog.client.get("/metrics").text
        #expect(metrics.contains("catalog_http_requests_total{route=\"/v1/videos/{id}/{access}/{file}\",method=\"GET\",status=\"206\"}"), "\(metrics)")
    }
}
