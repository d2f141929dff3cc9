import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

@testable import CatalogService

/// Images on resources, end to end over a real server and real libvips: uploads checked
/// and kept, originals and renditions served with the caching they promise, refusals of
/// hostile files, the quota, the sweep and account deletion.
@Suite struct ImageTests {
    /// Uploads `bytes` as `type` to `path` (`…/{id}/image`).
    static func upload(_ client: APIClient, _ path: String, _ bytes: [UInt8], type: String) async throws -> APIResponse {
        try await client.send("PUT", path, headers: ["Content-Type": type], body: Data(bytes))
    }

    /// A new game's path.
    static func game(_ catalog: TestCatalog) async throws -> String {
        "/v1/games/" + (try await catalog.api.games.create(GameInput(name: "Frogger", imageName: "frogger")).value.id.rawValue)
    }

    /// The size libvips reads from `bytes`' header, as `format`.
    static func size(_ bytes: Data, _ format: ImageFormat) throws -> (Int, Int) {
        let inspected = try ImagePipeline.inspect(Array(bytes), declared: format)
        return (inspected.width, inspected.height)
    }

    @Test(arguments: TestEngine.all) func anUploadIsKeptShownAndServedWithItsRenditions(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let game = try await Self.game(catalog)
            let before = try await catalog.api.changes.page(since: nil, limit: 100).nextToken
            let answer = try await Self.upload(catalog.client, game + "/image", TestImages.png(width: 300, height: 200), type: "image/png")
            #expect(answer.status == 200, "\(answer.text)")
            let shown = try answer.decode(Game.self)
            let image = try #require(shown.image)
            #expect(shown.version == 2 && answer.header("ETag") == "\"2\"")
            #expect(image.width == 300 && image.height == 200 && image.contentType == "image/png")
            #expect(image.url == "/v1/images/" + image.hash && ImageMember.isHash(image.hash))
            #expect((6...100).contains(image.blurHash.count))
            // The change reaches the feed as an update of the game.
            let changes = try await catalog.api.changes.page(since: before, limit: 100).changes
            #expect(changes.contains { $0.id.rawValue == String(game.dropFirst(10)) && $0.version == 2 })
            // A read shows the same.
            #expect(try await catalog.client.get(game).decode(Game.self).image == image)

            // The original: its bytes are what the hash names.
            let original = try await catalog.client.get(image.url)
            #expect(original.status == 200 && original.header("Content-Type") == "image/png")
            #expect(Crypto.hex(Crypto.sha256(Array(original.body))) == image.hash)
            for response in [original] {
                #expect(response.header("Cache-Control") == "public, max-age=31536000, immutable")
                #expect(response.header("X-Content-Type-Options") == "nosniff")
                #expect(response.header("Content-Security-Policy") == "default-src 'none'")
            }
            // A rendition: the next size of the ladder, never enlarged, in the format asked.
            let webp = try await catalog.client.get(image.url + "?w=128&format=webp")
            #expect(webp.status == 200 && webp.header("Content-Type") == "image/webp")
            #expect(try Self.size(webp.body, .webp) == (128, 85))
            let tag = try #require(webp.header("ETag"))
            #expect(!tag.hasPrefix("W/") && webp.header("Cache-Control") == "public, max-age=31536000, immutable" && webp.header("Vary") == nil)
            let unchanged = try await catalog.client.get(image.url + "?w=128&format=webp", headers: ["If-None-Match": tag])
            #expect(unchanged.status == 304 && unchanged.body.isEmpty && unchanged.header("ETag") == tag)
            let head = try await catalog.client.send("HEAD", image.url + "?w=128&format=webp")
            #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == String(webp.body.count))
            let covered = try await catalog.client.get(image.url + "?w=64&h=64&fit=cover&format=jpeg&q=50")
            #expect(try Self.size(covered.body, .jpeg) == (64, 64))
            // A side not asked for is the ladder's largest at most: no request re-encodes a whole original.
            let wide = try #require(
                try await Self.upload(catalog.client, try await Self.game(catalog) + "/image", TestImages.png(width: 3000, height: 100), type: "image/png")
                    .decode(Game.self).image)
            #expect(try Self.size(try await catalog.client.get(wide.url + "?format=webp").body, .webp) == (2048, 68))
            #expect(try Self.size(try await catalog.client.get(wide.url + "?h=64&format=webp").body, .webp) == (1920, 64))
            let larger = try await catalog.client.get(image.url + "?w=2048")
            let largerSize = try Self.size(larger.body, .jpeg)
            #expect(larger.header("Content-Type") == "image/jpeg" && largerSize == (300, 200))

            // Removing it is a change too; the image stays until the sweep.
            let removed = try await catalog.client.send("DELETE", game + "/image")
            #expect(removed.status == 204 && removed.header("ETag") == "\"3\"")
            let after = try await catalog.client.get(game).decode(Game.self)
            #expect(after.image == nil && after.version == 3)
            #expect(try await catalog.client.get(image.url).status == 200)
        }
    }

    @Test func formatAutoNegotiatesByAcceptAndVariesByIt() async throws {
        let catalog = try TestCatalog(seed: false)
        let game = try await Self.game(catalog)
        let image = try #require(
            try await Self.upload(catalog.client, game + "/image", TestImages.image(.jpeg, width: 200, height: 100), type: "image/jpeg").decode(Game.self).image)
        for (accept, type) in [
            ("image/avif,image/webp,*/*", "image/avif"), ("image/webp,*/*;q=0.8", "image/webp"), ("*/*", "image/jpeg"),
            ("image/avif;q=0, image/webp", "image/webp"),
        ] {
            let answer = try await catalog.client.get(image.url + "?w=64&format=auto", headers: ["Accept": accept])
            #expect(answer.status == 200 && answer.header("Content-Type") == type, "\(accept)")
            #expect(answer.header("Vary") == "Accept" && answer.header("Cache-Control") == "public, max-age=3600", "\(accept)")
        }
    }

    @Test func requestsOutsideTheLadderAndItsParametersAreRefused() async throws {
        let catalog = try TestCatalog(seed: false)
        let game = try await Self.game(catalog)
        let image = try #require(
            try await Self.upload(catalog.client, game + "/image", TestImages.png(width: 40, height: 40), type: "image/png").decode(Game.self).image)
        for query in ["w=300", "w=0", "w=064", "h=100000", "fit=fill&w=64", "format=png", "format=gif", "q=75", "size=64", "w=64&w=128"] {
            let answer = try await catalog.client.get(image.url + "?" + query)
            #expect(answer.status == 400 && answer.problem?.code == "invalidParameter", "\(query): \(answer.text)")
        }
        // Cropping needs both sides: with one, `fit` changes nothing, not even the cache entry.
        let widthOnly = try await catalog.client.get(image.url + "?w=64&fit=cover")
        let contained = try await catalog.client.get(image.url + "?w=64")
        #expect(widthOnly.status == 200 && widthOnly.header("ETag") == contained.header("ETag"))
        let ladder = try await catalog.client.get(image.url + "?w=300")
        #expect(ladder.problem?.detail?.contains("64, 96, 128") == true)
        #expect(try await catalog.client.get("/v1/images/" + String(repeating: "A", count: 64)).problem?.code == "invalidHash")
        #expect(try await catalog.client.get("/v1/images/../etc/passwd").status == 404)
        let missing = try await catalog.client.get("/v1/images/" + String(repeating: "0", count: 64) + "?w=64")
        #expect(missing.status == 404)
        #expect(try await catalog.client.get("/v1/images/" + String(repeating: "0", count: 64)).status == 404)
    }

    @Test func hostileFilesAreRefusedBeforeDecodingOrKeptStripped() async throws {
        let catalog = try TestCatalog(seed: false)
        let game = try await Self.game(catalog)
        func refused(_ bytes: [UInt8], _ type: String, _ status: Int, _ code: String) async throws {
            let answer = try await Self.upload(catalog.client, game + "/image", bytes, type: type)
            #expect(answer.status == status && answer.problem?.code == code, "\(code): \(answer.status) \(answer.text)")
        }
        // The type comes from the bytes: a PNG said to be a JPEG, SVG (scripts), HTML, GIF.
        try await refused(TestImages.png(width: 8, height: 8), "image/jpeg", 415, "contentTypeMismatch")
        let svg = Array(#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#.utf8)
        try await refused(svg, "image/svg+xml", 415, "unsupportedMediaType")
        try await refused(svg, "image/png", 415, "unsupportedImage")
        try await refused(Array("GIF89a".utf8) + [UInt8](repeating: 0, count: 64), "image/png", 415, "unsupportedImage")
        try await refused(TestImages.png(width: 8, height: 8), "application/octet-stream", 415, "unsupportedMediaType")
        // A decompression bomb and a JPEG claiming 65,000 × 65,000: refused from the header.
        try await refused(TestImages.pngClaiming(width: 50_000, height: 50_000), "image/png", 422, "imageTooLarge")
        var giant = try TestImages.image(.jpeg, width: 16, height: 16)
        let frame = try #require(giant.indices.first { giant[$0] == 0xFF && [0xC0, 0xC2].contains(giant[$0 + 1]) })
        giant.replaceSubrange((frame + 5)..<(frame + 9), with: [0xFD, 0xE8, 0xFD, 0xE8])
        try await refused(giant, "image/jpeg", 422, "imageTooLarge")
        // A side no rendition format can hold, though few pixels.
        try await refused(TestImages.pngClaiming(width: 20_000, height: 10), "image/png", 422, "imageTooLarge")
        // Truncated: the header reads, the picture does not.
        let whole = try TestImages.image(.jpeg, width: 256, height: 256)
        try await refused(Array(whole.prefix(whole.count / 2)), "image/jpeg", 422, "imageUndecodable")
        try await refused(Array(TestImages.png(width: 64, height: 64).prefix(200)), "image/png", 422, "imageUndecodable")
        // More than 20 MB: refused from Content-Length, before a byte of the body is kept.
        try await refused([UInt8](repeating: 0xFF, count: ImageRules.maxBytes + 1), "image/jpeg", 413, "contentTooLarge")
        #expect(try await catalog.client.get(game).decode(Game.self).image == nil)

        // EXIF with a GPS position: kept without it.
        let located = TestImages.withGPS(try TestImages.image(.jpeg, width: 64, height: 48))
        #expect(located.contains(subsequence: Array("Exif".utf8)))
        let kept = try #require(try await Self.upload(catalog.client, game + "/image", located, type: "image/jpeg").decode(Game.self).image)
        let keptBytes = Array(try await catalog.client.get(kept.url).body)
        #expect(!keptBytes.contains(subsequence: Array("Exif".utf8)) && kept.width == 64 && kept.height == 48)
        // A PNG that is also a page: kept as a picture only, and served so no browser runs it.
        let polyglot = try #require(try await Self.upload(catalog.client, game + "/image", TestImages.polyglot(), type: "image/png").decode(Game.self).image)
        let served = try await catalog.client.get(polyglot.url)
        #expect(!Array(served.body).contains(subsequence: Array("<script".utf8)))
        #expect(served.header("Content-Type") == "image/png" && served.header("X-Content-Type-Options") == "nosniff")
    }

    @Test func everyFormatIsAcceptedAndKeptInItsOwnFormat() async throws {
        let catalog = try TestCatalog(seed: false)
        let game = try await Self.game(catalog)
        for format in ImageFormat.allCases {
            let answer = try await Self.upload(catalog.client, game + "/image", try TestImages.image(format, width: 48, height: 32), type: format.contentType)
            let image = try #require(try answer.decode(Game.self).image, "\(format): \(answer.text)")
            #expect(image.contentType == format.contentType && image.width == 48 && image.height == 32)
            #expect(try await catalog.client.get(image.url).header("Content-Type") == format.contentType)
        }
    }

    @Test func ownersSetTheirCoversAndAvatarsAndAMembersImagesHaveAQuota() async throws {
        let catalog = try TestCatalog(seed: false) { $0.imageQuotaBytes = 4000 }
        let member = try catalog.user("Member")
        let client = APIClient(baseURL: catalog.client.baseURL, key: member.key)
        let playlist = try await client.send("POST", "/v1/playlists", json: ["title": "Mine"]).decode(Playlist.self)
        let small = TestImages.png(width: 16, height: 16)
        #expect(try await Self.upload(client, "/v1/playlists/\(playlist.id)/image", small, type: "image/png").status == 200)
        #expect(try await Self.upload(client, "/v1/users/\(member.id)/image", TestImages.png(width: 17, height: 17), type: "image/png").status == 200)
        #expect(try await client.get("/v1/me").decode(User.self).image?.width == 17)
        // The same bytes again cost nothing more; new ones past the quota are refused.
        #expect(try await Self.upload(client, "/v1/playlists/\(playlist.id)/image", small, type: "image/png").status == 200)
        // Noise does not compress: 100 × 100 pixels keep 30,000 bytes and more.
        let noise = TestImages.png(width: 100, height: 100) { x, y in (UInt8((x * 7919 + y * 104_729) % 251), UInt8((x * y + 13) % 253), UInt8((x ^ y) % 256)) }
        let over = try await Self.upload(client, "/v1/users/\(member.id)/image", noise, type: "image/png")
        #expect(over.status == 409 && over.problem?.code == "quotaExceeded", "\(over.text)")
        // Editors are not limited.
        let editor = try catalog.user("Editor", role: .editor)
        let editorClient = APIClient(baseURL: catalog.client.baseURL, key: editor.key)
        #expect(try await Self.upload(editorClient, "/v1/playlists/\(playlist.id)/image", TestImages.png(width: 40, height: 40), type: "image/png").status == 200)
        // If-Match guards an upload like any write.
        let stale = try await client.send("PUT", "/v1/users/\(member.id)/image", headers: ["Content-Type": "image/png", "If-Match": "\"1\""], body: Data(small))
        #expect(stale.status == 412)
    }

    @Test func aRenditionNeverMadeSpendsTheExpensiveBudgetAndACachedOneARead() async throws {
        let catalog = try TestCatalog(seed: false) {
            $0.rateLimits = [.read: RatePolicy(quota: 1000, window: 600), .write: RatePolicy(quota: 1000, window: 600), .expensive: RatePolicy(quota: 3, window: 600)]
        }
        let game = try await Self.game(catalog)
        // The upload spends one expensive token of the admin's three.
        let image = try #require(
            try await Self.upload(catalog.client, game + "/image", TestImages.png(width: 64, height: 64), type: "image/png").decode(Game.self).image)
        let anonymous = APIClient(baseURL: catalog.client.baseURL)
        for width in [64, 96, 128] {
            #expect(try await anonymous.get(image.url + "?w=\(width)&format=webp").status == 200)
        }
        let refused = try await anonymous.get(image.url + "?w=192&format=webp")
        #expect(refused.status == 429 && refused.header("Retry-After") != nil)
        // What is made is a read: served again and again.
        for _ in 0..<5 { #expect(try await anonymous.get(image.url + "?w=64&format=webp").status == 200) }
        #expect(try await anonymous.get(image.url).status == 200, "the original was kept in the cache at upload")
    }

    @Test func theUploadsHeldAtOnceHaveABudget() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("uploads-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let library = ImageLibrary(
            store: try LocalMediaStore(directory: directory.appendingPathComponent("media").path),
            cache: try RenditionCache(directory: directory.appendingPathComponent("cache").path, diskBudget: 1 << 20, memoryBudget: 1 << 20))
        #expect(library.reserve(upload: ImageLibrary.maxUploadBytes - ImageRules.maxBytes))
        #expect(library.reserve(upload: ImageRules.maxBytes))
        #expect(!library.reserve(upload: 1), "full: the next upload is answered 503")
        library.release(upload: ImageRules.maxBytes)
        #expect(library.reserve(upload: ImageRules.maxBytes))
    }

    @Test func oneRenditionIsMadeOnceHoweverManyAskAtOnce() async throws {
        let catalog = try TestCatalog(seed: false)
        let game = try await Self.game(catalog)
        let image = try #require(
            try await Self.upload(catalog.client, game + "/image", TestImages.png(width: 1200, height: 900), type: "image/png").decode(Game.self).image)
        func made() async throws -> Int {
            let metrics = try await catalog.client.get("/metrics").text
            let line = try #require(metrics.split(separator: "\n").first { $0.hasPrefix("catalog_image_renditions_made_total ") })
            return Int(line.split(separator: " ")[1]) ?? -1
        }
        let before = try await made()
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<40 { group.addTask { try await catalog.client.get(image.url + "?w=1024&format=avif").status } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
        #expect(try await made() == before + 1)
    }

    @Test(arguments: TestEngine.all) func theSweepRemovesWhatNothingShowsAndAccountDeletionTheAvatar(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let game = try await Self.game(catalog)
            let first = try #require(
                try await Self.upload(catalog.client, game + "/image", TestImages.png(width: 20, height: 20), type: "image/png").decode(Game.self).image)
            let second = try #require(
                try await Self.upload(catalog.client, game + "/image", TestImages.png(width: 21, height: 21), type: "image/png").decode(Game.self).image)
            // An original whose write never committed: in the store, without a record.
            let orphan = String(repeating: "ab", count: 32)
            let media = catalog.directory.appendingPathComponent("media/originals")
            try Data(TestImages.png(width: 4, height: 4)).write(to: media.appendingPathComponent(orphan))
            // Within the grace period, nothing goes.
            #expect(try catalog.application.sweepImages() == (0, 0))
            #expect(try catalog.application.sweepImages(grace: .zero) == (1, 1))
            #expect(try await catalog.client.get(first.url).status == 404)
            #expect(try await catalog.client.get(first.url + "?w=64").status == 404)
            #expect(try await catalog.client.get(second.url).status == 200)
            #expect(!FileManager.default.fileExists(atPath: media.appendingPathComponent(orphan).path))

            // Deleting an account removes its avatar (nothing else shows it).
            let member = try catalog.user("Leaving")
            let client = APIClient(baseURL: catalog.client.baseURL, key: member.key)
            let avatar = try #require(
                try await Self.upload(client, "/v1/users/\(member.id)/image", TestImages.png(width: 22, height: 22), type: "image/png").decode(User.self).image)
            #expect(try await client.send("DELETE", "/v1/me").status == 204)
            var gone = false
            for _ in 0..<100 where !gone {
                gone = !FileManager.default.fileExists(atPath: media.appendingPathComponent(avatar.hash).path)
                if !gone { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(gone)
            #expect(try await catalog.client.get(avatar.url).status == 404)
        }
    }

    @Test func theDemoCatalogShowsPicturesItMadeItselfTheSameEachTime() async throws {
        let first = try TestCatalog { $0.seedDemoArtwork = true }
        let second = try TestCatalog { $0.seedDemoArtwork = true }
        for catalog in [first, second] {
            let games = try await catalog.client.all("/v1/games?limit=100", as: Game.self)
            let items = try await catalog.client.all("/v1/playable-items?limit=100", as: PlayableItem.self)
            let playlists = try await catalog.client.all("/v1/playlists?limit=100", as: Playlist.self)
            #expect(games.allSatisfy { $0.image?.width == 960 && $0.image?.height == 540 && $0.version == 2 })
            #expect(items.allSatisfy { $0.image?.contentType == "image/jpeg" })
            #expect(playlists.allSatisfy { $0.image?.width == $0.image?.height })
            let poster = try #require(items.first?.image)
            #expect(try await catalog.client.get(poster.url + "?w=192&format=webp").status == 200)
        }
        let names = { (catalog: TestCatalog) in try await catalog.client.all("/v1/games?limit=100", as: Game.self).map { [$0.name, $0.image?.hash ?? ""] } }
        #expect(try await names(first) == (try await names(second)), "each title gets the same picture")
        let hashes = Set(try await first.client.all("/v1/playable-items?limit=100", as: PlayableItem.self).compactMap(\.image?.hash))
        #expect(hashes.count == DemoCatalog.items.count, "each title its own")
    }

    @Test func theBlurHashIsWhatTheReferenceEncoderMakes() async throws {
        let catalog = try TestCatalog(seed: false)
        let game = try await Self.game(catalog)
        let pixel: (Int, Int) -> (UInt8, UInt8, UInt8) = { x, y in (UInt8(x * 8), UInt8(y * 10), 128) }
        let image = try #require(
            try await Self.upload(catalog.client, game + "/image", TestImages.png(width: 32, height: 24, color: pixel), type: "image/png")
                .decode(Game.self).image)
        // PyPI's blurhash (the reference algorithm's Python port) over the same pixels.
        let script = "import blurhash; print(blurhash.encode([[[x * 8, y * 10, 128] for x in range(32)] for y in range(24)], 4, 3))"
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        process.waitUntilExit()
        let reference = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(process.terminationStatus == 0)
        #expect(image.blurHash == reference)
    }
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in the bytes.
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        return (0...(count - needle.count)).contains { start in self[start..<(start + needle.count)].elementsEqual(needle) }
    }
}
