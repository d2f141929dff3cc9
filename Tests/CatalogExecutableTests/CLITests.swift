import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import ServiceTestSupport
import TestSupport
import Testing

/// The `catalog` command-line client against a real server.
@Suite struct CLITests {
    struct Run {
        let status: Int32
        let output: String
        let errors: String

        /// What the CLI printed, decoded; a failure quotes all it printed and its status.
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            do {
                return try CatalogJSON.makeDecoder().decode(type, from: Data(output.utf8))
            } catch {
                throw CLIOutputError(description: "status \(status), standard output \(output.debugDescription), standard error \(errors.debugDescription): \(error)")
            }
        }
    }

    struct CLIOutputError: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `catalog` to its end, on a thread of its own; with `trusting`, in a private
    /// mount namespace whose system CA bundle is that file (URLSession on Linux, through
    /// libcurl, trusts only the system bundle; this changes nothing outside the child).
    static func run(_ arguments: [String], server: URL, input: Data? = nil, trusting caFile: String? = nil) async throws -> Run {
        try await onThread { try blockingRun(arguments, server: server, input: input, trusting: caFile) }
    }

    private static func blockingRun(_ arguments: [String], server: URL, input: Data?, trusting caFile: String?) throws -> Run {
        let process = ChildProcess()
        let catalog = Executables.server.deletingLastPathComponent().appendingPathComponent("catalog")
        if let caFile {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments =
                ["--mount", "sh", "-c", #"mount --bind "$0" /etc/ssl/certs/ca-certificates.crt && exec "$@""#, caFile, catalog.path]
                + arguments
        } else {
            process.executableURL = catalog
            process.arguments = arguments
        }
        process.environment = ["CATALOG_URL": server.absoluteString, "CATALOG_API_KEY": TestCatalog.adminKey(for: server) ?? ""]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let stdin = Pipe()
        if input != nil { process.standardInput = stdin }
        try launch(process)
        if let input {
            stdin.fileHandleForWriting.write(input)
            try stdin.fileHandleForWriting.close()
        }
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: out, as: UTF8.self), errors: String(decoding: err, as: UTF8.self))
    }

    @Test(arguments: TestEngine.all) func watchPrintsChangesAsTheyHappen(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: true)
            let server = catalog.client.baseURL
            let process = ChildProcess()
            process.executableURL = Executables.server.deletingLastPathComponent().appendingPathComponent("catalog")
            process.arguments = ["watch", "--table", "--types", "game", "--wait", "5"]
            process.environment = ["CATALOG_URL": server.absoluteString]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try await onThread { try launch(process) }
            defer { if process.isRunning { process.terminate() } }
            let created = try await catalog.client.send("POST", "/v1/games", json: ["name": "Watched", "imageName": "w"])
            let game = try created.decode(Game.self)
            // Every demo game, then the new one, as they come; given up after 10 s.
            let lines = try await onThread { () -> [String] in
                let watchdog = DispatchWorkItem { process.terminate() }
                DispatchQueue.global().asyncAfter(deadline: .now() + 10, execute: watchdog)
                defer { watchdog.cancel() }
                var text = ""
                while !text.contains("upsert game \(game.id) v1\n") {
                    let data = output.fileHandleForReading.availableData
                    if data.isEmpty { break }
                    text += String(decoding: data, as: UTF8.self)
                }
                return text.split(separator: "\n").map(String.init)
            }
            #expect(lines.count == DemoCatalog.games.count + 1, "\(lines)")
            #expect(lines.last == "upsert game \(game.id) v1")
            #expect(lines.allSatisfy { $0.hasPrefix("upsert game ") })
        }
    }

    @Test(arguments: TestEngine.all) func theClientLibraryWorksOverTLSAndVerifiesTheCertificate(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let certificates = try TestCertificates.shared()
            let tls = try TLSContext(certificateFile: certificates.certificateFile, privateKeyFile: certificates.keyFile)
            let catalog = try TestCatalog(seed: false) { $0.server.tls = tls }
            let server = catalog.client.baseURL
            #expect(server.scheme == "https")
            let created = try await Self.run(["games", "create", "--name", "Galaga", "--image-name", "galaga"], server: server, trusting: certificates.caFile)
            #expect(created.status == 0, "\(created.errors)")
            let game = try created.decode(Game.self)
            let fetched = try await Self.run(["games", "get", game.id.rawValue], server: server, trusting: certificates.caFile)
            #expect(try fetched.decode(Game.self) == game)
            let listed = try await Self.run(["games", "list", "--table"], server: server, trusting: certificates.caFile)
            #expect(listed.output.contains("Galaga"))
            // Without the test CA the certificate is refused, and nothing is sent.
            let untrusted = try await Self.run(["games", "create", "--name", "Defender", "--image-name", "defender"], server: server)
            #expect(untrusted.status != 0)
            #expect(untrusted.errors.lowercased().contains("certificate") || untrusted.errors.contains("SSL"), "\(untrusted.errors)")
            #expect(try catalog.application.store.games.count() == 1)
        }
    }

    @Test(arguments: TestEngine.all) func createGetListAndErrors(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let server = catalog.client.baseURL
            let created = try await Self.run(["games", "create", "--name", "Pac-Man", "--image-name", "pac-man"], server: server)
            try #require(created.status == 0, "\(created.errors)")
            let game = try created.decode(Game.self)
            #expect(game.name == "Pac-Man")

            let fetched = try await Self.run(["games", "get", game.id.rawValue], server: server)
            try #require(fetched.status == 0, "\(fetched.errors)")
            #expect(try fetched.decode(Game.self) == game)

            let table = try await Self.run(["games", "list", "--table"], server: server)
            #expect(table.output.split(separator: "\n").first?.hasPrefix("id") == true)
            #expect(table.output.contains("Pac-Man"))

            let invalid = try await Self.run(["games", "create", "--name", "", "--image-name", "x"], server: server)
            #expect(invalid.status == 1)
            #expect(invalid.errors.contains("422"))
            #expect(invalid.output.isEmpty)

            let missing = try await Self.run(["items", "get", CatalogID().rawValue], server: server)
            #expect(missing.status == 1)
            #expect(missing.errors.contains("No resource exists with this id."))

            let unreachable = try await Self.run(["games", "list", "--server", "http://127.0.0.1:1"], server: server)
            #expect(unreachable.status == 1)
            #expect(unreachable.errors.hasPrefix("catalog: transport"))
        }
    }

    @Test(arguments: TestEngine.all) func playlistsAndComments(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let server = catalog.client.baseURL
            let ids = try await Fixtures.items(catalog.api, 3)
            let decoder = CatalogJSON.makeDecoder()
            let created = try await Self.run(["playlists", "create", "--title", "Road trip"], server: server)
            #expect(created.status == 0, "\(created.errors)")
            let playlist = try decoder.decode(Playlist.self, from: Data(created.output.utf8))
            var entries: [PlaylistEntry] = []
            for id in ids {
                let added = try await Self.run(["playlists", "add", playlist.id.rawValue, id.rawValue], server: server)
                #expect(added.status == 0, "\(added.errors)")
                entries.append(try decoder.decode(PlaylistEntry.self, from: Data(added.output.utf8)))
            }
            let moved = try await Self.run(["playlists", "move", playlist.id.rawValue, entries[2].entryId.rawValue, "--to", "0", "--if-match", "\"4\""], server: server)
            #expect(moved.status == 0, "\(moved.errors)")
            let stale = try await Self.run(["playlists", "move", playlist.id.rawValue, entries[2].entryId.rawValue, "--to", "1", "--if-match", "\"4\""], server: server)
            #expect(stale.status == 1)
            #expect(stale.errors.contains("412"))
            let removed = try await Self.run(["playlists", "remove", playlist.id.rawValue, entries[0].entryId.rawValue], server: server)
            #expect(removed.status == 0, "\(removed.errors)")
            #expect(removed.errors.contains("\"6\""))
            let shown = try await Self.run(["playlists", "show", playlist.id.rawValue], server: server)
            let detail = try decoder.decode(Playlist.self, from: Data(shown.output.utf8))
            #expect(detail.entries?.items.map(\.playableItem.id) == [ids[2], ids[1]])
            #expect(detail.entries?.items.map(\.position) == [0, 1])
            let table = try await Self.run(["playlists", "show", playlist.id.rawValue, "--table"], server: server)
            #expect(table.output.contains("Video 2") && table.output.contains("position"))

            let comment = try await Self.run(["comments", "post", ids[0].rawValue, "--body", "Lovely"], server: server)
            #expect(comment.status == 0, "\(comment.errors)")
            let parent = try decoder.decode(CatalogModels.Comment.self, from: Data(comment.output.utf8))
            let reply = try await Self.run(["comments", "post", ids[0].rawValue, "--body", "Agreed", "--reply-to", parent.id.rawValue], server: server)
            #expect(reply.status == 0, "\(reply.errors)")
            let listed = try decoder.decode(Page<CatalogModels.Comment>.self, from: Data(await Self.run(["comments", "list", ids[0].rawValue], server: server).output.utf8))
            #expect(listed.items.map(\.replyCount) == [1])
            _ = try await Self.run(["comments", "post", ids[0].rawValue, "--body", "Second"], server: server)
            let every = try decoder.decode(
                Page<CatalogModels.Comment>.self,
                from: Data(await Self.run(["comments", "list", ids[0].rawValue, "--all", "--limit", "1"], server: server).output.utf8))
            #expect(every.items.map(\.body) == ["Second", "Lovely"], "--all follows the cursor, newest first")
            #expect(every.items.allSatisfy { $0.author == "Admin" }, "the author is the caller")
            #expect(every.nextCursor == nil)
            let replies = try await Self.run(["comments", "replies", parent.id.rawValue, "--table"], server: server)
            #expect(replies.output.contains("Admin") && replies.output.contains("Agreed"))
            let nested = try await Self.run(
                [
                    "comments", "post", ids[0].rawValue, "--body", "x", "--reply-to",
                    (try decoder.decode(CatalogModels.Comment.self, from: Data(reply.output.utf8))).id.rawValue,
                ], server: server)
            #expect(nested.status == 1)
            #expect(nested.errors.contains("422"))
        }
    }

    @Test(arguments: TestEngine.all) func exportThenImportTwice(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let source = try TestCatalog()
            let target = try TestCatalog(seed: false)
            let exported = try await Self.run(["export"], server: source.client.baseURL)
            #expect(exported.status == 0, "\(exported.errors)")
            let lines = exported.output.split(separator: "\n")
            #expect(lines.count > 40)
            #expect(exported.errors.contains("exported \(lines.count) records"))
            let decoder = CatalogJSON.makeDecoder()
            let first = try await Self.run(["import"], server: target.client.baseURL, input: Data(exported.output.utf8))
            #expect(first.status == 0, "\(first.errors)")
            #expect(try decoder.decode(ImportSummary.self, from: Data(first.output.utf8)) == ImportSummary(created: lines.count))
            let second = try await Self.run(["import", "--batch", "7"], server: target.client.baseURL, input: Data(exported.output.utf8))
            #expect(try decoder.decode(ImportSummary.self, from: Data(second.output.utf8)) == ImportSummary(unchanged: lines.count))
            #expect(try await Self.run(["export"], server: target.client.baseURL).output == exported.output)
            let garbage = try await Self.run(["import"], server: target.client.baseURL, input: Data("{\"type\":\"game\"}\n".utf8))
            #expect(garbage.status == 1)
            #expect(garbage.errors.contains("line 1"))
        }
    }

    @Test func aVideoIsUploadedResumablyWithProgress() async throws {
        let catalog = try TestCatalog(seed: false)
        let clip = try await TestVideos.clip(seconds: 5, width: 640, height: 360)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: clip.path)[.size] as? Int)
        let item = try await Self.run(["items", "create", "--title", "Uploaded", "--stream-url", "https://example.com/u"], server: catalog.client.baseURL)
            .decode(PlayableItem.self)
        let uploaded = try await Self.run(["items", "upload", item.id.rawValue, clip.path, "--chunk-size", "65536"], server: catalog.client.baseURL)
        #expect(uploaded.status == 0, "\(uploaded.errors)")
        #expect(uploaded.errors.hasPrefix("upload /v1/uploads/"))
        // A line per chunk (the clip is more than two), ending with all of it.
        #expect(size > 2 * 65536)
        #expect(uploaded.errors.contains("65536/\(size) bytes") && uploaded.errors.hasSuffix("\(size)/\(size) bytes (100%)\n"), "\(uploaded.errors)")
        #expect(try uploaded.decode(PlayableItem.self).video?.status == .processing)
        // Going on with an upload that is complete sends nothing more.
        let path = String(uploaded.errors.split(separator: "\n")[0].dropFirst("upload ".count))
        let again = try await Self.run(["items", "upload", item.id.rawValue, clip.path, "--resume", path], server: catalog.client.baseURL)
        #expect(again.status == 0 && again.errors.hasSuffix("\(size)/\(size) bytes (100%)\n"), "\(again.errors)")
        let missing = try await Self.run(["items", "upload", item.id.rawValue, "/no/such/file.mp4"], server: catalog.client.baseURL)
        #expect(missing.status != 0 && missing.errors.contains("Cannot read /no/such/file.mp4"))
    }

    @Test func imagesAreSetRemovedAndCarriedByExportAndImport() async throws {
        let source = try TestCatalog(seed: false)
        let target = try TestCatalog(seed: false)
        let folder = source.directory.appendingPathComponent("cli-images")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("artwork.webp")
        try Data(TestImages.image(.webp, width: 48, height: 36)).write(to: file)
        let game = try await Self.run(["games", "create", "--name", "Pictured", "--image-name", "p"], server: source.client.baseURL).decode(Game.self)
        let set = try await Self.run(["games", "image", "set", game.id.rawValue, file.path], server: source.client.baseURL)
        let shown = try set.decode(Game.self)
        #expect(shown.image?.contentType == "image/webp" && shown.image?.width == 48)
        let notAnImage = folder.appendingPathComponent("notes.txt")
        try Data("not a picture".utf8).write(to: notAnImage)
        let refused = try await Self.run(["games", "image", "set", game.id.rawValue, notAnImage.path], server: source.client.baseURL)
        #expect(refused.status != 0 && refused.errors.contains("is not a JPEG, PNG, WebP, HEIC or AVIF image"))

        // Export with the originals; an import without them is refused, with them it lands.
        let images = folder.appendingPathComponent("exported").path
        let exported = try await Self.run(["export", "--images", images], server: source.client.baseURL)
        #expect(exported.status == 0 && exported.errors.contains("1 images into"), "\(exported.errors)")
        let hash = try #require(shown.image?.hash)
        #expect(FileManager.default.fileExists(atPath: images + "/" + hash))
        let without = try await Self.run(["import"], server: target.client.baseURL, input: Data(exported.output.utf8))
        #expect(without.status == 1 && without.errors.contains("422"))
        let with = try await Self.run(["import", "--images", images], server: target.client.baseURL, input: Data(exported.output.utf8))
        #expect(with.status == 0, "\(with.errors)")
        #expect(try await target.api.games.get(game.id).value.image == shown.image)

        let removed = try await Self.run(["games", "image", "remove", game.id.rawValue], server: source.client.baseURL)
        #expect(removed.status == 0)
        #expect(try await source.api.games.get(game.id).value.image == nil)
    }

    @Test func aViewersProgressIsRecordedShownAndListed() async throws {
        let catalog = try TestCatalog(seed: false)
        let server = catalog.client.baseURL
        let item = try await catalog.api.playableItems.create(
            PlayableItemInput(title: "Sintel", streamURL: URL(string: "https://example.com/s.m3u8")!, durationSeconds: 888)
        ).value.id
        let recorded = try await Self.run(["me", "progress", item.rawValue, "--position", "300"], server: server)
        let answer = try recorded.decode(ProgressAnswer.self)
        #expect(answer.applied && answer.progress.positionSeconds == 300 && answer.progress.deviceId == "catalog-cli")
        #expect(try await Self.run(["me", "progress", item.rawValue], server: server).decode(PlaybackProgress.self) == answer.progress)
        let listed = try await Self.run(["me", "continue"], server: server).decode(Page<ContinueWatchingEntry>.self)
        #expect(listed.items.map(\.playableItem.id) == [item])
        let table = try await Self.run(["me", "continue", "--table"], server: server)
        #expect(table.output.contains("Sintel") && table.output.contains("300"))
        #expect(try await Self.run(["me"], server: server).decode(User.self).id == catalog.adminID, "catalog me still shows the profile")
        let none = try await Self.run(["me", "progress", CatalogID().rawValue], server: server)
        #expect(none.status == 1 && none.errors.contains("no progress"))
    }

    /// `catalog webhooks …` end to end, with a real receiver verifying what it gets.
    @Test func webhooksAreManagedAndTheirDeliveriesShown() async throws {
        let catalog = try TestCatalog(seed: false) { configuration in
            configuration.webhookAllowedNetworks = ["127.0.0.1/32"]
            configuration.webhookHTTPNetworks = ["127.0.0.1/32"]
        }
        defer { try? catalog.stop() }
        let server = catalog.client.baseURL
        let receiver = try await WebhookReceiver()
        let created = try await Self.run(["webhooks", "create", receiver.url, "--events", "game.created,game.deleted", "--description", "CMS"], server: server)
            .decode(Webhook.self)
        #expect(created.eventTypes == ["game.created", "game.deleted"] && created.description == "CMS")
        try receiver.trust([try #require(created.secret)])
        let table = try await Self.run(["webhooks", "list", "--table"], server: server)
        #expect(table.output.contains(created.id.rawValue) && table.output.contains("CMS") && !table.output.contains("whsec_"))
        _ = try await catalog.api.games.create(GameInput(name: "Sent", imageName: "s"))
        let received = try await receiver.wait { !$0.isEmpty }
        #expect(received.first?.verified == [0] && received.first?.type == "game.created")
        var deliveries = Page<WebhookDelivery>(items: [], nextCursor: nil)
        for _ in 0..<200 where deliveries.items.first?.status != .delivered {
            deliveries = try await Self.run(["webhooks", "deliveries", created.id.rawValue], server: server).decode(Page<WebhookDelivery>.self)
            if deliveries.items.first?.status != .delivered { try await Task.sleep(for: .milliseconds(25)) }
        }
        let delivery = try #require(deliveries.items.first)
        #expect(delivery.status == .delivered && delivery.messageId == received.first?.id)
        let retried = try await Self.run(["webhooks", "retry", created.id.rawValue, delivery.id.rawValue], server: server).decode(WebhookDelivery.self)
        #expect(retried.status == .pending)
        let again = try await receiver.wait { $0.count >= 2 }
        #expect(again.count == 2 && again[1].id == again[0].id && again[1].body == again[0].body)
        let rotated = try await Self.run(["webhooks", "rotate-secret", created.id.rawValue, "--overlap", "60"], server: server).decode(WebhookSecret.self)
        #expect(rotated.secret.hasPrefix("whsec_") && rotated.secret != created.secret)
        let disabled = try await Self.run(["webhooks", "update", created.id.rawValue, "--disable", "--table"], server: server)
        #expect(disabled.status == 0 && disabled.output.contains("no"))
        #expect(try await Self.run(["webhooks", "delete", created.id.rawValue], server: server).status == 0)
        let gone = try await Self.run(["webhooks", "show", created.id.rawValue], server: server)
        #expect(gone.status == 1 && gone.errors.contains("404") || gone.errors.lowercased().contains("not"))
    }

    @Test func aViewersFavoritesRatingsAndExport() async throws {
        let catalog = try TestCatalog(seed: false)
        let server = catalog.client.baseURL
        let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Sintel", streamURL: URL(string: "https://example.com/s.m3u8")!))
            .value.id
        #expect(try await Self.run(["me", "favorite", "playable-items", item.rawValue], server: server).status == 0)
        let listed = try await Self.run(["me", "favorites", "--table"], server: server)
        #expect(listed.output.contains("Sintel") && listed.output.contains("playable-items"))
        #expect(try await Self.run(["me", "favorites", "--type", "games"], server: server).decode(Page<Favorite>.self).items.isEmpty)
        let wrong = try await Self.run(["me", "favorite", "songs", item.rawValue], server: server)
        #expect(wrong.status != 0 && wrong.errors.contains("not a kind of favorite"))
        #expect(try await Self.run(["me", "rate", item.rawValue, "like"], server: server).decode(ItemRating.self).rating == .like)
        #expect(try await Self.run(["me", "rate", item.rawValue, "love"], server: server).status != 0)
        #expect(try await Self.run(["me", "up-next"], server: server).decode([UpNextEntry].self).isEmpty)
        let exported = try await Self.run(["me", "export"], server: server)
        let types = exported.output.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["type"] as? String
        }
        #expect(types.first == "user" && types.contains("favorite") && types.contains("rating"))
        #expect(try await Self.run(["me", "favorite", "playable-items", item.rawValue, "--remove"], server: server).status == 0)
        #expect(try await Self.run(["me", "favorites"], server: server).decode(Page<Favorite>.self).items.isEmpty)
    }
}
