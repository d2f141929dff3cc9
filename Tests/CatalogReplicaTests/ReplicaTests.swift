import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Two `catalog-server` processes on one PostgreSQL database, as replicas behind a load
/// balancer: what one writes, the other sees and respects.
@Suite(.enabled(if: TestEngine.all.contains(.postgresql), "replicas share a PostgreSQL database: needs CATALOG_TEST_POSTGRES_URL"))
struct ReplicaTests {
    /// Two servers started at once on a fresh database (both offered the demo catalog).
    final class Replicas: @unchecked Sendable {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-replicas-\(UUID().uuidString)")
        let database: String
        let key: String
        private(set) var servers: [ServerProcess] = []
        var processes: [ChildProcess] { servers.map(\.process) }
        var clients: [APIClient] { servers.map(\.client) }

        /// With `mediaStore` (an `s3://` address), both keep images there; else each in a
        /// folder of its own.
        init(mediaStore: String? = nil, environment: [String: String] = [:]) async throws {
            database = try TestEngine.postgresDatabase(for: directory)
            key = try await Executables.bootstrapKey(database: database)
            // Started together; each picks its own port (0) and logs it: no race for a free port with other tests.
            // Webhooks: one key file for both, loopback receivers, and short leases.
            let webhookKey = directory.appendingPathComponent("webhook.key")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: webhookKey.path, contents: Data(try Crypto.randomBytes(32)), attributes: [.posixPermissions: 0o600])
            let arguments = [
                "--database", database, "--migrations", migrationsDirectory.path, "--rate-limits", "off", "--webhook-key-file", webhookKey.path,
                "--webhook-allowed-networks", "127.0.0.1/32", "--webhook-http-networks", "127.0.0.1/32", "--webhook-lease", "3",
            ]
            func media(_ index: Int) -> [String] {
                (mediaStore.map { ["--media-store", $0] } ?? ["--media-directory", directory.appendingPathComponent("media-\(index)").path])
                    + ["--image-cache-directory", directory.appendingPathComponent("image-cache-\(index)").path]
            }
            let environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            async let first = ServerProcess(arguments + media(0), environment: environment, log: directory.appendingPathComponent("replica-0.log"), key: key)
            async let second = ServerProcess(arguments + media(1), environment: environment, log: directory.appendingPathComponent("replica-1.log"), key: key)
            servers = try await [first, second]
        }

        /// The replica for the `index`th request of a spread.
        func client(_ index: Int) -> APIClient { clients[index % clients.count] }

        deinit {
            servers = []
            TestEngine.release(directory)
            try? FileManager.default.removeItem(at: directory)
        }
    }

    @Test func replicasShareOneCatalog() async throws {
        let replicas = try await Replicas()
        // The demo catalog is seeded exactly once, though both started on an empty database.
        for client in replicas.clients {
            #expect(try await client.all("/v1/games?limit=100", as: Game.self).count == DemoCatalog.games.count)
            #expect(try await client.all("/v1/playlists?limit=100", as: Playlist.self).count == DemoCatalog.playlists.count)
        }
        // 64 concurrent creates spread over both replicas are all there, on both.
        let created = try await withThrowingTaskGroup(of: CatalogID.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let response = try await replicas.client(index).send("POST", "/v1/games", json: ["name": "Replica \(index)", "imageName": "r\(index)"])
                    #expect(response.status == 201)
                    return try response.decode(Game.self).id
                }
            }
            return try await group.reduce(into: Set<CatalogID>()) { $0.insert($1) }
        }
        #expect(created.count == 64)
        for client in replicas.clients {
            let ids = Set(try await client.all("/v1/games?limit=100", as: Game.self).map(\.id))
            #expect(created.isSubset(of: ids))
        }
    }

    /// A list page a replica reads from its event loop is kept with the database snapshot
    /// it was read in, and answered as kept while PostgreSQL is still there: a create
    /// through the other replica shows on the very next request all the same.
    @Test func aPageOneReplicaKeepsShowsTheOthersCreateAtOnce() async throws {
        let replicas = try await Replicas()
        let path = "/v1/playable-items?limit=3&sort=-createdAt"
        let titles = { (client: APIClient) async throws -> [String] in
            let page = try await client.get(path)
            #expect(page.status == 200, "\(page.text)")
            return try page.decode(Page<PlayableItem>.self).items.map(\.title)
        }
        for round in 0..<12 {
            let (writer, reader) = (replicas.client(round), replicas.client(round + 1))
            // The reader keeps the page (the same request at once may be answered as kept).
            let kept = try await titles(reader)
            #expect(try await titles(reader) == kept)
            let title = "Round \(round)"
            let created = try await writer.send("POST", "/v1/playable-items", json: ["title": title, "streamURL": "https://example.com/\(round)"])
            #expect(created.status == 201)
            #expect(try await titles(reader).first == title, "round \(round): the other replica's create, on the very next request")
        }
        // Pages were answered as kept (asked again while any commit in the cluster, a lease
        // renewal or another test's write, moved the snapshot on).
        let unchanged = { (client: APIClient) async throws -> Int in
            let metrics = try await client.get("/metrics").text
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("catalog_db_loop_pages_unchanged_total ") }
            return Int(line?.split(separator: " ").last ?? "") ?? 0
        }
        var answeredAsKept = false
        let deadline = ContinuousClock.now + .seconds(30)
        while !answeredAsKept, ContinuousClock.now < deadline {
            _ = try await titles(replicas.client(1))
            answeredAsKept = try await unchanged(replicas.client(1)) > 0
        }
        #expect(answeredAsKept)
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["CATALOG_TEST_S3_ENDPOINT"] != nil, "needs CATALOG_TEST_S3_ENDPOINT (.ci/s3.sh)"))
    func anImageUploadedThroughOneReplicaIsServedByTheOther() async throws {
        let endpoint = try #require(ProcessInfo.processInfo.environment["CATALOG_TEST_S3_ENDPOINT"])
        let credentials = ["AWS_ACCESS_KEY_ID": "catalog", "AWS_SECRET_ACCESS_KEY": "catalog-secret"]
        let address = "s3://catalog-tests/replicas-\(UUID().uuidString.lowercased())?endpoint=\(endpoint)"
        try S3MediaStore(S3MediaStore.Address(address), environment: credentials).createBucket()
        let replicas = try await Replicas(mediaStore: address, environment: credentials)
        let game = try await replicas.client(0).send("POST", "/v1/games", json: ["name": "Shared", "imageName": "shared"]).decode(Game.self)
        let uploaded = try await replicas.client(0).send(
            "PUT", "/v1/games/\(game.id)/image", headers: ["Content-Type": "image/png"], body: Data(TestImages.png(width: 120, height: 80)))
        let image = try #require(try uploaded.decode(Game.self).image, "\(uploaded.text)")
        // The other replica has never seen it: it reads the original from the bucket.
        #expect(try await replicas.client(1).get("/v1/games/\(game.id)").decode(Game.self).image == image)
        let original = try await replicas.client(1).get(image.url)
        #expect(original.status == 200 && Crypto.hex(Crypto.sha256(Array(original.body))) == image.hash)
        let rendition = try await replicas.client(1).get(image.url + "?w=64&format=webp")
        #expect(rendition.status == 200 && rendition.header("Content-Type") == "image/webp")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["CATALOG_TEST_S3_ENDPOINT"] != nil, "needs CATALOG_TEST_S3_ENDPOINT (.ci/s3.sh)"))
    func anUploadsAppendsGoThroughEitherReplicaAndOneProcessesIt() async throws {
        let endpoint = try #require(ProcessInfo.processInfo.environment["CATALOG_TEST_S3_ENDPOINT"])
        let credentials = ["AWS_ACCESS_KEY_ID": "catalog", "AWS_SECRET_ACCESS_KEY": "catalog-secret"]
        let address = "s3://catalog-tests/replica-videos-\(UUID().uuidString.lowercased())?endpoint=\(endpoint)"
        try S3MediaStore(S3MediaStore.Address(address), environment: credentials).createBucket()
        let replicas = try await Replicas(mediaStore: address, environment: credentials)
        let clip = try Data(contentsOf: try await TestVideos.clip(seconds: 2, width: 640, height: 360, audio: false, noisy: true))
        let item = try await replicas.client(0).send("POST", "/v1/playable-items", json: ["title": "Shared", "streamURL": "https://example.com/s"])
            .decode(PlayableItem.self).id
        let tus = ["Tus-Resumable": "1.0.0"]
        let created = try await replicas.client(0).send("POST", "/v1/playable-items/\(item)/video", headers: tus.merging(["Upload-Length": "\(clip.count)"]) { $1 })
        let path = try #require(created.header("Location"))
        // Appends of 5 MiB, each through the other replica: the parts and the tail between
        // them are the bucket's, not either server's.
        var offset = 0, index = 0
        while offset < clip.count {
            let chunk = clip[offset..<min(clip.count, offset + (5 << 20))]
            let appended = try await replicas.client(index).send(
                "PATCH", path, headers: tus.merging(["Content-Type": "application/offset+octet-stream", "Upload-Offset": "\(offset)"]) { $1 }, body: Data(chunk))
            #expect(appended.status == 204, "\(appended.text)")
            offset = Int(appended.header("Upload-Offset") ?? "") ?? clip.count
            index += 1
        }
        var video: Video?
        for _ in 0..<300 where video?.status != .ready {
            video = try await replicas.client(1).get("/v1/playable-items/\(item)").decode(PlayableItem.self).video
            if video?.status != .ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        let ready = try #require(video)
        #expect(ready.status == .ready, "\(ready)")
        // One replica ran the job, once. (Its log line may reach the file a batch after the
        // video reads as ready: a log writer gathers lines for 20 ms.)
        func readyLines() throws -> Int {
            try (0..<2).map { try String(contentsOf: replicas.directory.appendingPathComponent("replica-\($0).log"), encoding: .utf8) }
                .map { $0.components(separatedBy: "Video \(ready.id) is ready").count - 1 }.reduce(0, +)
        }
        for _ in 0..<50 where try readyLines() == 0 { try await Task.sleep(for: .milliseconds(100)) }
        #expect(try readyLines() == 1)
        for client in replicas.clients {
            let master = try await client.get(try #require(ready.hls))
            #expect(master.status == 200 && master.text.contains("360p/index.m3u8"))
        }
    }

    @Test func concurrentConditionalReordersHaveOneWinner() async throws {
        let replicas = try await Replicas()
        let items = try await replicas.client(0).all("/v1/playable-items?limit=100", as: PlayableItem.self).map(\.id.rawValue)
        let playlist = try await replicas.client(0).send("POST", "/v1/playlists", json: ["title": "Contested"])
        let id = try playlist.decode(Playlist.self).id
        let etag = try #require(playlist.header("ETag"))
        // Eight reorders sent at once, each If-Match the same version, half to each replica.
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<8 {
                group.addTask {
                    let order = Array(items.shuffled().prefix(5))
                    return try await replicas.client(index).send(
                        "PUT", "/v1/playlists/\(id)/entries", json: ["playableItemIds": order],
                        headers: ["If-Match": etag]
                    ).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.sorted() == [200] + Array(repeating: 412, count: 7), "exactly one wins: \(statuses)")
    }

    @Test func positionsStayDenseUnderAMixedWorkloadOnBothReplicas() async throws {
        let replicas = try await Replicas()
        let items = try await replicas.client(0).all("/v1/playable-items?limit=100", as: PlayableItem.self).map(\.id.rawValue)
        let id = try await replicas.client(1).send("POST", "/v1/playlists", json: ["title": "Busy"]).decode(Playlist.self).id
        for item in items.prefix(6) {
            #expect(try await replicas.client(0).send("POST", "/v1/playlists/\(id)/entries", json: ["playableItemId": item]).status == 201)
        }
        // 120 unconditional inserts, moves and removals at random places, spread over both,
        // 12 at a time: all 120 at once on this 2-core machine (with the other suites and
        // PostgreSQL) let a read wait past its one-second statement timeout (a 503), and
        // 24 at a time still did, once in three CI runs.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<120 {
                if index >= 12 { try await group.next() }
                group.addTask {
                    var generator = SystemRandomNumberGenerator()
                    let client = replicas.client(index)
                    let entries = try await client.all("/v1/playlists/\(id)/entries?limit=100", as: PlaylistEntry.self)
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0:
                        let position = Int.random(in: 0...entries.count, using: &generator)
                        _ = try await client.send(
                            "POST", "/v1/playlists/\(id)/entries",
                            json: ["playableItemId": items.randomElement(using: &generator) ?? items[0], "position": position])
                    case 1:
                        guard let entry = entries.randomElement(using: &generator) else { return }
                        _ = try await client.send(
                            "PATCH", "/v1/playlists/\(id)/entries/\(entry.entryId)",
                            json: ["position": Int.random(in: 0..<entries.count, using: &generator)],
                            contentType: "application/merge-patch+json")
                    default:
                        guard let entry = entries.randomElement(using: &generator) else { return }
                        _ = try await client.send("DELETE", "/v1/playlists/\(id)/entries/\(entry.entryId)")
                    }
                }
            }
            try await group.waitForAll()
        }
        for client in replicas.clients {
            let entries = try await client.all("/v1/playlists/\(id)/entries?limit=100", as: PlaylistEntry.self)
            #expect(entries.map(\.position) == Array(0..<entries.count), "dense, in order")
            let playlist = try await client.get("/v1/playlists/\(id)").decode(Playlist.self)
            #expect(playlist.entryCount == entries.count)
        }
    }

    @Test func anIdempotencyKeyRunsOnceAcrossReplicas() async throws {
        let replicas = try await Replicas()
        // Sixteen copies of one request with one key, at once, half to each replica.
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<16 {
                group.addTask {
                    try await replicas.client(index).send(
                        "POST", "/v1/games", json: ["name": "Once only", "imageName": "once"],
                        headers: ["Idempotency-Key": "\"replicated-1\""]
                    ).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(Set(statuses).isSubset(of: [201, 409]), "a first answer, its replays, or in use: \(statuses)")
        #expect(statuses.contains(201))
        let games = try await replicas.client(1).all("/v1/games?limit=100", as: Game.self)
        #expect(games.filter { $0.name == "Once only" }.count == 1, "created once")
    }

    /// Each replica remembers the keys it checked (no read of the database per request),
    /// yet a key revoked, or a user's role changed, through one replica is refused by the
    /// other on the very next request: the change is answered once both have forgotten.
    @Test func aKeyRevokedThroughOneReplicaIsRefusedByTheOther() async throws {
        let replicas = try await Replicas()
        // Both replicas hold a current lease of remembered credentials.
        func current() throws -> Int {
            Int(
                try PostgresAdmin.integer(
                    "SELECT count(*) FROM credential_replicas WHERE alive_until > (extract(epoch FROM clock_timestamp()) * 1000)::bigint", at: replicas.database
                ) ?? 0)
        }
        for _ in 0..<100 where try current() < 2 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try current() == 2)
        let user = try await replicas.client(0).send("POST", "/v1/users", json: ["displayName": "Operator", "role": "admin"])
        let userID = try #require(try JSONSerialization.jsonObject(with: user.body) as? [String: Any])["id"] as? String
        let created = try await replicas.client(0).send("POST", "/v1/api-keys", json: ["name": "short-lived", "role": "admin", "userId": try #require(userID)])
        #expect(created.status == 201)
        let body = try #require(try JSONSerialization.jsonObject(with: created.body) as? [String: Any])
        let secret = try #require(body["secret"] as? String), keyID = try #require(body["id"] as? String)
        let other = APIClient(baseURL: replicas.clients[1].baseURL, key: secret)
        #expect(try await other.get("/v1/users").status == 200)
        // Behind both replicas' backs (no notification): the key's hash changes, and the other still knows it.
        func quietly(_ sql: String) throws {
            try PostgresAdmin.run(
                "ALTER TABLE api_keys DISABLE TRIGGER api_keys_changed_credentials; \(sql); ALTER TABLE api_keys ENABLE TRIGGER api_keys_changed_credentials",
                at: replicas.database)
        }
        try quietly(
            "CREATE TABLE saved_hash AS SELECT secret_hash FROM api_keys WHERE id = '\(keyID)'; UPDATE api_keys SET secret_hash = decode(md5('a') || md5('b'), 'hex') WHERE id = '\(keyID)'"
        )
        #expect(try await other.get("/v1/users").status == 200, "remembered, not read again")
        try quietly("UPDATE api_keys SET secret_hash = (SELECT secret_hash FROM saved_hash) WHERE id = '\(keyID)'")
        // The user's role changed through the first: the other refuses what it no longer allows, at once.
        let patched = try await replicas.client(0).send(
            "PATCH", "/v1/users/\(try #require(userID))", json: ["role": "member"], contentType: "application/merge-patch+json")
        #expect(patched.status == 200, "\(patched.text)")
        #expect(try await other.get("/v1/users").status == 403, "the very next request on the other replica")
        #expect(try await other.get("/v1/me").status == 200)
        // A replica that cannot say it forgot (stopped) holds the revocation's answer until its lease has ended.
        let stopped = replicas.processes[1].processIdentifier
        kill(stopped, SIGSTOP)
        let revoked = try await replicas.client(0).send("DELETE", "/v1/api-keys/\(keyID)")
        let lagging = try PostgresAdmin.integer(
            """
            SELECT count(*) FROM credential_replicas, credential_generation
            WHERE seen < generation AND alive_until > (extract(epoch FROM clock_timestamp()) * 1000)::bigint
            """, at: replicas.database)
        kill(stopped, SIGCONT)
        #expect(revoked.status == 204)
        #expect(lagging == 0, "answered once no live lease lags behind the revocation")
        #expect(try await other.get("/v1/me").status == 401, "the very next request on the other replica")
    }

    @Test func everyAcknowledgedWriteSurvivesKill9OfAReplica() async throws {
        let replicas = try await Replicas()
        let created = try await withThrowingTaskGroup(of: CatalogID.self) { group in
            for index in 0..<32 {
                group.addTask {
                    try await replicas.client(0).send("POST", "/v1/games", json: ["name": "Durable \(index)", "imageName": "d\(index)"]).decode(Game.self).id
                }
            }
            return try await group.reduce(into: Set<CatalogID>()) { $0.insert($1) }
        }
        let victim = replicas.processes[0]
        kill(victim.processIdentifier, SIGKILL)
        victim.waitUntilExit()
        #expect(victim.terminationReason == .uncaughtSignal)
        // The other replica, and a fresh open of the database, find every acknowledged write.
        let ids = Set(try await replicas.clients[1].all("/v1/games?limit=100", as: Game.self).map(\.id))
        #expect(created.isSubset(of: ids))
        let store = try CatalogStore(.postgresql(replicas.database), migrations: Migration.load(from: migrationsDirectory, for: .postgresql))
        defer { try? store.close() }
        for id in created { #expect(try store.games.rendered(id)?.version == 1) }
    }

    /// Both replicas send webhooks; one killed mid-delivery leaves its deliveries to the
    /// other once their leases end: every committed change arrives at least once.
    @Test func everyChangeIsDeliveredWhenAReplicaIsKilledMidDelivery() async throws {
        let receiver = try await WebhookReceiver(["--delay", "0.4"])
        let replicas = try await Replicas()
        let webhook = try await replicas.client(0).send("POST", "/v1/webhooks", json: ["url": receiver.url, "eventTypes": ["game.created"]])
        #expect(webhook.status == 201, "\(webhook.text)")
        try receiver.trust([try #require(try webhook.decode(Webhook.self).secret)])
        var created: Set<String> = []
        for index in 0..<30 {
            created.insert(try await replicas.client(index).send("POST", "/v1/games", json: ["name": "Sent \(index)", "imageName": "s"]).decode(Game.self).id.rawValue)
        }
        try await receiver.wait { $0.count >= 4 }
        let victim = replicas.processes[0]
        kill(victim.processIdentifier, SIGKILL)
        victim.waitUntilExit()
        // At least once: a message sent twice (killed before its outcome was kept) keeps its id and body.
        try await receiver.expectEveryOne(of: created)
    }

    @Test func writesThroughOneReplicaReachTheOtherReplicasFeed() async throws {
        let replicas = try await Replicas()
        let start = try #require(
            try JSONSerialization.jsonObject(with: try await replicas.clients[1].get("/v1/changes?limit=1000&types=game").body)
                as? [String: Any])
        let token = try #require(start["nextToken"] as? String)
        // A stream and a long-poll on one replica; writes through the other.
        let port = try #require(replicas.clients[1].baseURL.port)
        let stream = try await onThread { try EventStreamClient(port: port, path: "/v1/changes?types=game&since=\(token)") }
        async let waited = replicas.clients[1].get("/v1/changes?types=game&wait=30&since=\(token)")
        try await Task.sleep(for: .milliseconds(300))
        var created: [String] = []
        for index in 0..<10 {
            let response = try await replicas.client(0).send("POST", "/v1/games", json: ["name": "Spread \(index)", "imageName": "s"])
            created.append(try response.decode(Game.self).id.rawValue)
        }
        let answer = try await waited
        #expect(answer.status == 200)
        #expect(answer.text.contains(created[0]))
        let count = created.count
        let events = try await onThread { try stream.events(count) }
        #expect(EventStreamClient.resourceIDs(events) == created, "every write, once, in commit order")
    }
}
