import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `GET /v1/changes`: a replica built only from the feed equals the catalog; tokens,
/// 410s, privacy, long-polls and event streams.
@Suite struct ChangeFeedTests {
    /// The path of a resource of feed type `type`.
    static func path(_ type: String, _ id: String) -> String {
        switch type {
        case "game": "/v1/games/\(id)"
        case "location": "/v1/locations/\(id)"
        case "playableItem": "/v1/playable-items/\(id)"
        case "playlist": "/v1/playlists/\(id)"
        default: "/v1/comments/\(id)"
        }
    }

    /// Reads the feed after `token` to its end, pages of `limit` (random when `nil`),
    /// applying each change to `replica` (by `type/id`). Returns the last token.
    @discardableResult
    static func follow(
        _ client: APIClient, from token: String?, into replica: inout [String: [String: Any]], limit: Int? = nil,
        generator: inout SeededGenerator, query: String = ""
    ) async throws -> String {
        var token = token
        var seen = Set<String>()
        while true {
            let size = limit ?? Int.random(in: 1...40, using: &generator)
            var path = "/v1/changes?limit=\(size)" + query
            if let token { path += "&since=" + token }
            let response = try await client.get(path)
            try #require(response.status == 200, "\(path): \(response.text)")
            let page = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            let changes = try #require(page["changes"] as? [[String: Any]])
            #expect(changes.count <= size)
            for change in changes {
                let key = "\(change["type"] ?? "")/\(change["id"] ?? "")"
                // One page never holds a resource twice (the log keeps its latest change).
                #expect(seen.insert(key).inserted, "\(key) twice in one page")
                if change["deleted"] as? Bool == true {
                    replica[key] = nil
                    // A playlist's entries go with it (their deletions are not reported).
                    if change["type"] as? String == "playlist" {
                        replica = replica.filter { ($0.value["resource"] as? [String: Any])?["playlistId"] as? String != change["id"] as? String }
                    }
                } else {
                    replica[key] = change
                }
            }
            seen.removeAll()
            token = try #require(page["nextToken"] as? String)
            if page["hasMore"] as? Bool != true { return token ?? "" }
        }
    }

    /// A playlist's entries in `replica`, in order (by order key), as `{entryId, addedAt, playableItemId}`.
    static func entries(of playlistID: String, in replica: [String: [String: Any]]) -> [NSDictionary] {
        replica.values.compactMap { $0["resource"] as? [String: Any] }
            .filter { $0["playlistId"] as? String == playlistID && $0["orderKey"] != nil }
            .sorted { ($0["orderKey"] as? Int64 ?? 0, $0["entryId"] as? String ?? "") < ($1["orderKey"] as? Int64 ?? 0, $1["entryId"] as? String ?? "") }
            .map { ["entryId": $0["entryId"] ?? "", "addedAt": $0["addedAt"] ?? "", "playableItemId": $0["playableItemId"] ?? ""] }
    }

    /// Checks `replica` against the catalog read directly: every id ever made is in the
    /// replica exactly when it exists, with the same representation, and a playlist's
    /// entries in the replica, sorted by their order keys, are its entries in order.
    static func expectEqual(_ replica: [String: [String: Any]], catalog client: APIClient, ids: [String: Set<String>]) async throws {
        var checked = 0
        for (type, set) in ids {
            for id in set {
                let key = "\(type)/\(id)"
                let direct = try await client.get(path(type, id))
                if direct.status == 404 {
                    #expect(replica[key] == nil, "\(key) is gone but the replica has it")
                    continue
                }
                try #require(direct.status == 200, "\(direct.text)")
                guard let change = replica[key] else {
                    Issue.record("\(key) exists but the replica lacks it")
                    continue
                }
                let resource = try JSONSerialization.jsonObject(with: direct.body) as? NSDictionary
                #expect((change["resource"] as? NSDictionary) == resource, "\(key): \(change["resource"] ?? "nil") against \(direct.text)")
                #expect(change["version"] as? Int == resource?["version"] as? Int)
                if type == "playlist" {
                    var entries: [NSDictionary] = []
                    var cursor: String?
                    repeat {
                        let page = try await client.get("/v1/playlists/\(id)/entries?limit=100" + (cursor.map { "&cursor=" + $0 } ?? ""))
                        let object = try #require(try JSONSerialization.jsonObject(with: page.body) as? [String: Any])
                        for entry in object["items"] as? [[String: Any]] ?? [] {
                            entries.append([
                                "entryId": entry["entryId"] ?? "", "addedAt": entry["addedAt"] ?? "",
                                "playableItemId": (entry["playableItem"] as? [String: Any])?["id"] ?? "",
                            ])
                        }
                        cursor = object["nextCursor"] as? String
                    } while cursor != nil
                    #expect(Self.entries(of: id, in: replica) == entries, "\(key)'s entries")
                    checked += entries.count
                }
                checked += 1
            }
        }
        // The replica holds nothing else.
        #expect(replica.count == checked, "the replica holds \(replica.count) resources and entries, the catalog \(checked)")
    }

    @Test(arguments: TestEngine.all) func aReplicaBuiltFromTheFeedEqualsTheCatalog(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let client = catalog.client
            var generator = SeededGenerator(seed: 0x5EED_C4A9)
            var ids: [String: Set<String>] = [:]
            var live: [String: [String]] = [:]
            var replica: [String: [String: Any]] = [:]
            var token: String?
            func created(_ response: APIResponse, _ type: String) throws {
                try #require(response.status == 201, "create \(type): \(response.text)")
                let object = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
                let id = try #require((object["id"] ?? object["entryId"]) as? String)
                ids[type, default: []].insert(id)
                live[type, default: []].append(id)
            }
            func pick(_ type: String) -> String? {
                guard let list = live[type], !list.isEmpty else { return nil }
                return list[Int.random(in: 0..<list.count, using: &generator)]
            }
            func forget(_ type: String, _ id: String) { live[type]?.removeAll { $0 == id } }
            let word = ["alpha", "bravo", "charlie", "delta", "echo"]
            for step in 0..<1000 {
                let roll = Int.random(in: 0..<100, using: &generator)
                let text = word[step % word.count] + " \(step)"
                switch roll {
                case 0..<8:
                    try created(try await client.send("POST", "/v1/games", json: ["name": text, "description": "d", "imageName": "g\(step)"]), "game")
                case 8..<14:
                    try created(try await client.send("POST", "/v1/locations", json: ["name": text, "countryCode": "FR", "latitude": 45.0, "longitude": 2.5]), "location")
                case 14..<26:
                    try created(
                        try await client.send("POST", "/v1/playable-items", json: ["title": text, "description": "d", "streamURL": "https://example.com/\(step).mp4"]),
                        "playableItem")
                case 26..<32:
                    let visibility = Bool.random(using: &generator) ? "public" : "private"
                    try created(try await client.send("POST", "/v1/playlists", json: ["title": text, "visibility": visibility]), "playlist")
                case 32..<44:
                    guard let item = pick("playableItem") else { continue }
                    var body: [String: Any] = ["body": text]
                    if Bool.random(using: &generator), let parent = pick("comment") { body["parentId"] = parent }
                    let response = try await client.send("POST", "/v1/playable-items/\(item)/comments", json: body)
                    if response.status == 201 { try created(response, "comment") } else { #expect([404, 409, 422].contains(response.status), "\(response.text)") }
                case 44..<60:
                    // An edit of something that exists.
                    let type = ["game", "location", "playableItem", "playlist", "comment"][Int.random(in: 0..<5, using: &generator)]
                    guard let id = pick(type) else { continue }
                    let patch: [String: Any] =
                        switch type {
                        case "game", "location": ["name": text]
                        case "playableItem": ["title": text]
                        case "playlist": Bool.random(using: &generator) ? ["title": text] : ["visibility": Bool.random(using: &generator) ? "public" : "private"]
                        default: ["body": text]
                        }
                    let response = try await client.send("PATCH", Self.path(type, id), json: patch, contentType: "application/merge-patch+json")
                    #expect([200, 404, 409].contains(response.status), "PATCH \(type): \(response.text)")
                case 60..<72:
                    guard let playlist = pick("playlist"), let item = pick("playableItem") else { continue }
                    let response = try await client.send("POST", "/v1/playlists/\(playlist)/entries", json: ["playableItemId": item])
                    #expect([201, 404, 422].contains(response.status), "add entry: \(response.text)")
                case 72..<82:
                    // A move or a removal of an entry.
                    guard let playlist = pick("playlist") else { continue }
                    let page = try await client.get("/v1/playlists/\(playlist)/entries?limit=100")
                    guard page.status == 200, let object = try JSONSerialization.jsonObject(with: page.body) as? [String: Any],
                        let items = object["items"] as? [[String: Any]], !items.isEmpty,
                        let entry = items[Int.random(in: 0..<items.count, using: &generator)]["entryId"] as? String
                    else { continue }
                    let response =
                        Bool.random(using: &generator)
                        ? try await client.send(
                            "PATCH", "/v1/playlists/\(playlist)/entries/\(entry)",
                            json: ["position": Int.random(in: 0..<items.count, using: &generator)], contentType: "application/merge-patch+json")
                        : try await client.send("DELETE", "/v1/playlists/\(playlist)/entries/\(entry)")
                    #expect([200, 204].contains(response.status), "entry: \(response.text)")
                default:
                    // Deletions; a comment with replies stays as a tombstone, an item takes its comments and entries.
                    let type = ["game", "location", "playableItem", "playlist", "comment", "comment"][Int.random(in: 0..<6, using: &generator)]
                    guard let id = pick(type) else { continue }
                    let response = try await client.send("DELETE", Self.path(type, id))
                    #expect([204, 404].contains(response.status), "DELETE \(type): \(response.text)")
                    if type != "comment" { forget(type, id) }
                }
                if step % 97 == 96 {
                    // Follow along now and then, so tokens carry the replica across writes.
                    token = try await Self.follow(client, from: token, into: &replica, generator: &generator)
                }
            }
            try await Self.follow(client, from: token, into: &replica, generator: &generator)
            try await Self.expectEqual(replica, catalog: client, ids: ids)
            // From scratch, in one go: the same.
            var fresh: [String: [String: Any]] = [:]
            try await Self.follow(client, from: nil, into: &fresh, limit: 1000, generator: &generator)
            try await Self.expectEqual(fresh, catalog: client, ids: ids)

            // The client library's replica agrees.
            let sync = CatalogSync(client: catalog.api)
            try await sync.sync()
            #expect(await sync.games.count == replica.keys.filter { $0.hasPrefix("game/") }.count)
            #expect(await sync.comments.count == replica.keys.filter { $0.hasPrefix("comment/") }.count)
            for key in replica.keys where key.hasPrefix("playlist/") {
                let id = try #require(CatalogID(String(key.dropFirst("playlist/".count))))
                let entries = await sync.entries(of: id).map(\.entryId.rawValue)
                #expect(entries == Self.entries(of: id.rawValue, in: replica).compactMap { $0["entryId"] as? String })
            }
        }
    }

    @Test(arguments: TestEngine.all) func filtersNarrowTheFeed(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: true)
            let client = catalog.client
            var generator = SeededGenerator(seed: 7)
            var games: [String: [String: Any]] = [:]
            try await Self.follow(client, from: nil, into: &games, generator: &generator, query: "&types=game")
            #expect(games.count == DemoCatalog.games.count)
            #expect(games.keys.allSatisfy { $0.hasPrefix("game/") })
            let items = try await client.all("/v1/playable-items?limit=100", as: PlayableItem.self)
            let item = try #require(items.first)
            var about: [String: [String: Any]] = [:]
            try await Self.follow(client, from: nil, into: &about, generator: &generator, query: "&playableItemId=\(item.id)")
            let comments = try await client.all("/v1/playable-items/\(item.id)/comments?limit=100", as: CatalogModels.Comment.self)
            #expect(about["playableItem/\(item.id)"] != nil)
            for comment in comments { #expect(about["comment/\(comment.id)"] != nil) }
            #expect(about.keys.allSatisfy { $0.hasPrefix("comment/") || $0 == "playableItem/\(item.id)" })

            for bad in ["types=user", "types=game,", "limit=0", "limit=1001", "wait=61", "wait=0", "playableItemId=x", "since=", "since=c1.%%%", "color=red"] {
                let response = try await client.get("/v1/changes?" + bad)
                #expect(response.status == 400, "\(bad): \(response.text)")
            }
            let streamWait = try await client.get("/v1/changes?wait=5", headers: ["Accept": "text/event-stream"])
            #expect(streamWait.status == 400)
        }
    }

    @Test(arguments: TestEngine.all) func tokensThatCannotContinueGet410(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false) { $0.changeRetention = .seconds(3_600) }
            let client = catalog.client
            let game = try await client.send("POST", "/v1/games", json: ["name": "Gone", "description": "d", "imageName": "g"])
            let gameID = try #require(try JSONSerialization.jsonObject(with: game.body) as? [String: Any])["id"] as? String ?? ""
            let first = try await client.get("/v1/changes")
            let page = try #require(try JSONSerialization.jsonObject(with: first.body) as? [String: Any])
            let tokenText = try #require(page["nextToken"] as? String)
            let token = try #require(ChangeToken(tokenText))
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            func status(_ token: ChangeToken) async throws -> (Int, String?) {
                let response = try await client.get("/v1/changes?since=" + token.encoded)
                return (response.status, response.problem?.code)
            }
            #expect(try await status(token) == (200, nil))
            // From another catalog, older than the retention, ahead of the log, made in the future.
            #expect(try await status(ChangeToken(catalog: "0123456789abcdef0123456789abcdef", seq: token.seq, issued: now)) == (410, "syncTokenExpired"))
            #expect(try await status(ChangeToken(catalog: token.catalog, seq: token.seq, issued: now - 3_601_000)) == (410, "syncTokenExpired"))
            #expect(try await status(ChangeToken(catalog: token.catalog, seq: token.seq + 1000, issued: now)) == (410, "syncTokenExpired"))
            #expect(try await status(ChangeToken(catalog: token.catalog, seq: token.seq, issued: now + 3_600_000)) == (410, "syncTokenExpired"))

            // A deletion after the token, then purged: the token has missed it.
            #expect(try await client.send("DELETE", "/v1/games/\(gameID)").status == 204)
            let after = try await client.get("/v1/changes?since=" + token.encoded)
            #expect(after.text.contains(#""deleted":true"#))
            let purged: Int = try await withCheckedThrowingContinuation { continuation in
                catalog.application.store.changes.purge(before: Int64(Date().timeIntervalSince1970 * 1000) + 1000) { continuation.resume(with: $0) }
            }
            #expect(purged == 1)
            #expect(try await status(token) == (410, "syncTokenExpired"))
            // Without a token, the feed starts again, without the purged deletion.
            let restart = try await client.get("/v1/changes")
            #expect(restart.status == 200)
            #expect(!restart.text.contains(gameID))
        }
    }

    @Test(arguments: TestEngine.all) func privateDataStaysOutOfTheFeedForEveryRole(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let owner = try catalog.user("Owner")
            let other = try catalog.user("Other")
            let editor = try catalog.user("Editor", role: .editor)
            let ownerClient = catalog.client(key: owner.key)
            func playlist(_ title: String, _ visibility: String) async throws -> String {
                let response = try await ownerClient.send("POST", "/v1/playlists", json: ["title": title, "visibility": visibility])
                return try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])["id"] as? String ?? ""
            }
            let secret = try await playlist("Secret", "private")
            let turned = try await playlist("Turned", "public")
            let open = try await playlist("Open", "public")
            let revealed = try await playlist("Revealed", "private")
            // Each holds two entries, added while it had its first visibility.
            let item = try await catalog.client.send("POST", "/v1/playable-items", json: ["title": "T", "description": "d", "streamURL": "https://example.com/t.mp4"])
            let itemID = try #require(try JSONSerialization.jsonObject(with: item.body) as? [String: Any])["id"] as? String ?? ""
            var entries: [String: Set<String>] = [:]
            for id in [secret, turned, open, revealed] {
                for _ in 0..<2 {
                    let added = try await ownerClient.send("POST", "/v1/playlists/\(id)/entries", json: ["playableItemId": itemID])
                    try #require(added.status == 201, "\(added.text)")
                    entries[id, default: []].insert(try #require(try JSONSerialization.jsonObject(with: added.body) as? [String: Any])["entryId"] as? String ?? "")
                }
            }
            // Turning private sends nothing but the playlist's own change (its entries are hidden where they are).
            let before = try #require(try JSONSerialization.jsonObject(with: try await ownerClient.get("/v1/changes?limit=1000").body) as? [String: Any])
            #expect(try await ownerClient.send("PATCH", "/v1/playlists/\(turned)", json: ["visibility": "private"], contentType: "application/merge-patch+json").status == 200)
            let turning = try await ownerClient.get("/v1/changes?since=\(before["nextToken"] as? String ?? "")")
            let turnedChanges = (try JSONSerialization.jsonObject(with: turning.body) as? [String: Any])?["changes"] as? [[String: Any]] ?? []
            #expect(turnedChanges.map { $0["type"] as? String ?? "" } == ["playlist"], "\(turning.text)")
            #expect(try await ownerClient.send("PATCH", "/v1/playlists/\(revealed)", json: ["visibility": "public"], contentType: "application/merge-patch+json").status == 200)
            // Entries are not an item's changes, whatever id is asked for; entries bring their playlists along.
            let byPlaylist = try await catalog.client.get("/v1/changes?playableItemId=\(open)")
            #expect(byPlaylist.status == 200 && !byPlaylist.text.contains("playlistEntry"), "\(byPlaylist.text)")
            let entriesOnly = try await catalog.client.get("/v1/changes?types=playlistEntry&limit=1000")
            #expect(entriesOnly.text.contains(#""type":"playlist","#) && entriesOnly.text.contains(#""type":"playlistEntry""#))

            var generator = SeededGenerator(seed: 3)
            let viewers: [(String, APIClient, whole: Set<String>, deleted: Set<String>)] = [
                ("anonymous", catalog.anonymous, [open, revealed], [turned]),
                ("another member", catalog.client(key: other.key), [open, revealed], [turned]),
                ("the owner", ownerClient, [open, secret, turned, revealed], []),
                ("an editor", catalog.client(key: editor.key), [open, secret, turned, revealed], []),
                ("an admin", catalog.client, [open, secret, turned, revealed], []),
            ]
            for (name, client, whole, deleted) in viewers {
                let response = try await client.get("/v1/changes?limit=1000")
                #expect(response.status == 200)
                let text = response.text
                // No user, key or email ever appears.
                #expect(!text.contains("@"), "\(name): \(text)")
                #expect(!text.contains("catalog_"), "\(name)")
                #expect(!text.contains(#""type":"user""#), "\(name)")
                for id in [secret, turned, open, revealed] {
                    let mentioned = text.contains(#""id":"\#(id)""#)
                    #expect(mentioned == (whole.contains(id) || deleted.contains(id)), "\(name) and \(id)")
                    // A playlist's entries are seen exactly when it is.
                    for entry in entries[id] ?? [] { #expect(text.contains(entry) == whole.contains(id), "\(name) and an entry of \(id)") }
                }
                var replica: [String: [String: Any]] = [:]
                try await Self.follow(client, from: nil, into: &replica, generator: &generator)
                #expect(Set(replica.keys.filter { $0.hasPrefix("playlist/") }.map { String($0.dropFirst("playlist/".count)) }) == whole, "\(name)")
                for id in whole { #expect(Set(Self.entries(of: id, in: replica).compactMap { $0["entryId"] as? String }) == entries[id], "\(name): \(id)'s entries") }
                for id in deleted { #expect(text.contains(#"{"deleted":true,"id":"\#(id)""#), "\(name) sees \(id) as deleted") }
            }
        }
    }

    /// A snapshot an earlier version saved (each playlist beside its entries, no order
    /// keys) still loads, without its entries and its token: the next sync starts over.
    @Test func anEarlierSnapshotLoadsWithoutItsEntriesAndStartsOver() throws {
        let playlistID = CatalogID()
        let playlist = Playlist(
            id: playlistID, title: "P", description: "", entryCount: 1, createdAt: Date(timeIntervalSince1970: 0),
            updatedAt: Date(timeIntervalSince1970: 0), version: 2)
        let encoded = try CatalogJSON.makeEncoder().encode(playlist)
        let json =
            #"{"token":"c1.abc","games":[],"playableItems":[],"locations":[],"comments":[],"playlists":[{"playlist":"#
            + String(decoding: encoded, as: UTF8.self)
            + #","entries":[{"entryId":"\#(CatalogID())","playableItemId":"\#(CatalogID())","addedAt":"1970-01-01T00:00:00.000Z"}]}]}"#
        let snapshot = try CatalogJSON.makeDecoder().decode(CatalogSyncSnapshot.self, from: Data(json.utf8))
        #expect(snapshot.token == nil)
        #expect(snapshot.playlists == [playlist])
        #expect(snapshot.playlistEntries.isEmpty)
        // Today's snapshots round-trip.
        let entry = ChangedEntry(entryId: CatalogID(), playlistId: playlistID, playableItemId: CatalogID(), addedAt: Date(timeIntervalSince1970: 1), orderKey: 42)
        let current = CatalogSyncSnapshot(token: "c1.x", playlists: [playlist], playlistEntries: [entry])
        #expect(try CatalogJSON.makeDecoder().decode(CatalogSyncSnapshot.self, from: CatalogJSON.makeEncoder().encode(current)) == current)
    }

    @Test(arguments: TestEngine.all) func catalogSyncFollowsLiveChangesAndStartsAgainAfterA410(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let first = try await catalog.api.games.create(GameInput(name: "First", imageName: "f"))
            let live = CatalogSync(client: catalog.api, types: [.game])
            let behind = CatalogSync(client: catalog.api, types: [.game])
            try await live.sync()
            try await behind.sync()
            #expect(await live.games.keys.sorted() == [first.value.id])
            // Live: a write arrives through a long-poll, applied before it is yielded.
            var changes = live.changes(wait: 5).makeAsyncIterator()
            let second = try await catalog.api.games.create(GameInput(name: "Second", imageName: "s"))
            let change = try await changes.next()
            #expect(change?.id == second.value.id)
            #expect(await live.games[second.value.id]?.name == "Second")
            // A deletion purged before `behind` saw it: its token gets 410, and it starts again.
            try await catalog.api.games.delete(first.value.id)
            let purged: Int = try await withCheckedThrowingContinuation { continuation in
                catalog.application.store.changes.purge(before: Int64(Date().timeIntervalSince1970 * 1000) + 1000) { continuation.resume(with: $0) }
            }
            #expect(purged == 1)
            try await behind.sync()
            #expect(await behind.games.keys.sorted() == [second.value.id])
        }
    }

    @Test(arguments: TestEngine.all) func aLongPollAnswersWhenAChangeCommits(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let client = catalog.client
            let start = try #require(try JSONSerialization.jsonObject(with: try await client.get("/v1/changes").body) as? [String: Any])
            let token = try #require(start["nextToken"] as? String)
            // Nothing happens: an empty page after the wait, continuing from the same place.
            let began = ContinuousClock.now
            let empty = try await client.get("/v1/changes?wait=1&since=" + token)
            #expect(ContinuousClock.now - began >= .milliseconds(900))
            let emptyPage = try #require(try JSONSerialization.jsonObject(with: empty.body) as? [String: Any])
            #expect((emptyPage["changes"] as? [Any])?.isEmpty == true)
            #expect(emptyPage["hasMore"] as? Bool == false)
            // A write while it waits ends the wait with the write.
            async let waited = client.get("/v1/changes?wait=30&since=" + token)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await client.send("POST", "/v1/games", json: ["name": "Woken", "description": "d", "imageName": "w"]).status == 201)
            let answer = try await waited
            #expect(answer.status == 200)
            #expect(answer.text.contains("Woken"))
            #expect(answer.header("Cache-Control") == "no-store")
        }
    }
}

@Suite struct EventStreamTests {
    static func create(_ client: APIClient, _ name: String) async throws -> String {
        let response = try await client.send("POST", "/v1/games", json: ["name": name, "description": "d", "imageName": "e"])
        #expect(response.status == 201, "\(response.text)")
        return (try JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["id"] as? String ?? ""
    }

    @Test(arguments: TestEngine.all) func eventsFollowWritesAndResumeFromLastEventID(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let port = try #require(catalog.client.baseURL.port)
            let first = try await onThread { try EventStreamClient(port: port) }
            var created: [String] = []
            for index in 0..<5 { created.append(try await Self.create(catalog.client, "Live \(index)")) }
            let events = try await onThread { try first.events(5) }
            #expect(first.head.hasPrefix("HTTP/1.1 200"))
            #expect(first.head.lowercased().contains("content-type: text/event-stream"))
            #expect(events.compactMap { $0["data"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["id"] as? String } == created)
            // Resuming after the third event gives the fourth and fifth, then what comes next.
            try #require(events.count == 5, "\(first.head)")
            let resumeFrom = try #require(events[2]["id"])
            let second = try await onThread { try EventStreamClient(port: port, headers: ["Last-Event-ID": resumeFrom]) }
            let later = try await Self.create(catalog.client, "Later")
            let resumed = try await onThread { try second.events(3) }
            #expect(
                resumed.compactMap { $0["data"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["id"] as? String }
                    == [created[3], created[4], later])
            // A shutdown ends both streams cleanly.
            try catalog.stop()
            _ = try await onThread { try first.events(1, timeout: 5) }
            #expect(first.ended, "the stream's last chunk")
        }
    }
}

extension EventStreamTests {
    /// A long order reaches a stream as one small change per entry, and a move in it as
    /// two (the entry and its playlist): what a reader receives per entry change does not
    /// grow with the playlist.
    @Test(arguments: TestEngine.all) func aLongOrderReachesAStreamAsSmallChangesAndAMoveAsTwo(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await catalog.client.send("POST", "/v1/playable-items", json: ["title": "Loop", "description": "d", "streamURL": "https://example.com/l.mp4"])
            let itemID = (try JSONSerialization.jsonObject(with: item.body) as? [String: Any])?["id"] as? String ?? ""
            let playlist = try await catalog.client.send("POST", "/v1/playlists", json: ["title": "Long"])
            let playlistID = (try JSONSerialization.jsonObject(with: playlist.body) as? [String: Any])?["id"] as? String ?? ""
            let order = try await catalog.client.send(
                "PUT", "/v1/playlists/\(playlistID)/entries",
                json: ["playableItemIds": Array(repeating: itemID, count: PlaylistOrder.maxEntries)])
            #expect(order.status == 200, "\(order.text.prefix(300))")
            let port = try #require(catalog.client.baseURL.port)
            let stream = try await onThread { try EventStreamClient(port: port) }
            // A stream catches up at some 300 changes a second (a round waits for the client
            // to drain the last): 17 s alone, more beside the whole suite.
            let events = try await onThread { try stream.events(PlaylistOrder.maxEntries + 2, timeout: 90) }
            let changes = events.compactMap { $0["data"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } }
            #expect(changes.filter { $0["type"] as? String == "playlistEntry" }.count == PlaylistOrder.maxEntries)
            #expect(events.allSatisfy { ($0["data"]?.utf8.count ?? 0) < 1024 }, "each change is small")
            // A move of the first entry to the middle: its change and its playlist's, nothing else.
            let first = try await catalog.client.get("/v1/playlists/\(playlistID)/entries?limit=1")
            let entryID = try #require(((try JSONSerialization.jsonObject(with: first.body) as? [String: Any])?["items"] as? [[String: Any]])?.first?["entryId"] as? String)
            let moved = try await catalog.client.send(
                "PATCH", "/v1/playlists/\(playlistID)/entries/\(entryID)", json: ["position": 2500],
                contentType: "application/merge-patch+json")
            #expect(moved.status == 200, "\(moved.text)")
            let after = try await onThread { try stream.events(3, timeout: 3) }
            let types = after.compactMap { $0["data"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["type"] as? String }
            #expect(types.sorted() == ["playlist", "playlistEntry"])
            #expect(after.reduce(0) { $0 + ($1["data"]?.utf8.count ?? 0) } < 2048)
        }
    }
}

/// Event streams across a crash, and a thousand of them at once.
@Suite struct EventStreamResilienceTests {

    @Test(.enabled(if: TestEngine.isSQLite, "kills a server on a SQLite file"))
    func aStreamResumesAfterKill9WithNothingMissingOrTwice() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-sse-kill-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let database = directory.appendingPathComponent("catalog.sqlite").path
        let key = try await Executables.bootstrapKey(database: database)
        let arguments = ["--database", database, "--migrations", migrationsDirectory.path, "--no-seed", "--rate-limits", "off"]
        let first = try await ServerProcess(arguments, log: directory.appendingPathComponent("first.log"), key: key)
        let stream = try await onThread { try EventStreamClient(port: first.port) }
        // Writes go on while the server is killed: the acknowledged ones must all arrive.
        // They are sent from a thread of their own, over raw sockets: under the whole suite,
        // an async client can wait seconds for a cooperative thread. A write refused before
        // the kill is sent again; after it, the writer stops at its first failure.
        let acknowledged = Mutex<[String]>([])
        let killed = Mutex(false)
        let refusal = Mutex("")
        let port = first.port
        let writer = Task {
            try await onThread {
                var index = 0
                while index < 400 {
                    let body = #"{"name":"Before \#(index)","description":"d","imageName":"k"}"#
                    let request =
                        "POST /v1/games HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(key)\r\nContent-Type: application/json\r\n"
                        + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
                    let answer = (try? Loopback.blockingExchange(port: port, Array(request.utf8))) ?? ""
                    let parts = answer.components(separatedBy: "\r\n\r\n")
                    guard answer.hasPrefix("HTTP/1.1 201"), parts.count > 1,
                        let id = (try? JSONSerialization.jsonObject(with: Data(parts[1].utf8)) as? [String: Any])?["id"] as? String
                    else {
                        if killed.withLock({ $0 }) { return }
                        refusal.withLock { $0 = String(answer.prefix(300)) }
                        usleep(50_000)
                        continue
                    }
                    acknowledged.withLock { $0.append(id) }
                    index += 1
                }
            }
        }
        // Whatever ends the test, the writer stops at its next failure (never left sending
        // to a port a later test's server may take).
        defer { killed.withLock { $0 = true } }
        // A generous bound: the whole suite runs beside it on two cores.
        // At least twenty: a read may bring more whole events than asked for.
        var received = EventStreamClient.resourceIDs(try await onThread { try stream.events(20, timeout: 120) })
        #expect(
            received.count >= 20,
            "last write refused: \(refusal.withLock { $0 }); \(String((try? String(contentsOf: directory.appendingPathComponent("first.log"), encoding: .utf8))?.suffix(1_500) ?? ""))"
        )
        killed.withLock { $0 = true }
        first.kill9()
        try await writer.value
        // What the socket still held arrives; a half event does not count.
        received += EventStreamClient.resourceIDs(try await onThread { try stream.events(10_000, timeout: 2) })
        let lastID = try #require(try await onThread { stream.lastEventID })

        let second = try await ServerProcess(arguments, log: directory.appendingPathComponent("second.log"), key: key)
        var after: [String] = []
        for index in 0..<20 {
            let response = try await second.client.send("POST", "/v1/games", json: ["name": "After \(index)", "description": "d", "imageName": "k"])
            #expect(response.status == 201)
            after.append((try JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["id"] as? String ?? "")
        }
        let everything = try await second.client.all("/v1/games?limit=100", as: Game.self).map(\.id.rawValue)
        let resumed = try await onThread { try EventStreamClient(port: second.port, headers: ["Last-Event-ID": lastID]) }
        let missing = everything.count - received.count
        received += EventStreamClient.resourceIDs(try await onThread { try resumed.events(missing) })
        #expect(Set(received).count == received.count, "no event twice")
        #expect(received == everything, "every game, in commit order")
        #expect(Set(acknowledged.withLock { $0 }).isSubset(of: Set(received)), "every acknowledged write")
        #expect(received.suffix(after.count) == after[...])
    }

    @Test(arguments: TestEngine.all) func aThousandStreamsEachGetAWriteWithinASecond(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let port = try #require(catalog.client.baseURL.port)
            let clients = 1000
            let (latencies, rssPerClient) = try await onThread { () -> ([Double], Int) in
                let before = Self.residentBytes()
                var streams: [EventStreamClient] = []
                // From ten loopback addresses: each stays under the per-address connection cap.
                for index in 0..<clients { streams.append(try EventStreamClient(port: port, source: "127.0.1.\(1 + index % 10)")) }
                // Every stream is open (its head has come) before the write.
                for stream in streams {
                    while stream.head.isEmpty {
                        _ = stream.take()
                        if stream.head.isEmpty, !stream.readMore() { throw Loopback.Failure(description: "a stream did not open") }
                    }
                    guard stream.head.hasPrefix("HTTP/1.1 200") else { throw Loopback.Failure(description: "a stream was refused: \(stream.head)") }
                }
                let during = Self.residentBytes()
                // The write goes over a socket of this thread.
                let body = #"{"name":"Broadcast","description":"d","imageName":"b"}"#
                let write = try Loopback.connect(port: port)
                defer { close(write) }
                let request =
                    "POST /v1/games HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(catalog.adminKey)\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
                let start = Date()
                _ = request.withCString { send(write, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
                var pending = Set(0..<clients)
                var arrived: [Int: Date] = [:]
                var polls = streams.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
                let deadline = Date(timeIntervalSinceNow: 10)
                while !pending.isEmpty, Date() < deadline {
                    guard poll(&polls, nfds_t(polls.count), 100) > 0 else { continue }
                    for index in pending where polls[index].revents != 0 {
                        _ = streams[index].readMore()
                        if !streams[index].take().isEmpty {
                            arrived[index] = Date()
                            pending.remove(index)
                            polls[index].events = 0
                        }
                    }
                }
                var answer = [UInt8](repeating: 0, count: 512)
                let count = recv(write, &answer, answer.count, 0)
                guard count > 12, String(decoding: answer[0..<12], as: UTF8.self) == "HTTP/1.1 201" else {
                    throw Loopback.Failure(description: "the write failed: \(String(decoding: answer.prefix(max(0, count)), as: UTF8.self))")
                }
                return (arrived.values.map { $0.timeIntervalSince(start) }, max(0, during - before) / clients)
            }
            #expect(latencies.count == clients, "every stream got the write")
            let late = latencies.filter { $0 > 1 }
            #expect(late.isEmpty, "\(late.count) streams waited more than a second")
            print(
                "1,000 event streams: the slowest got the write \(Int((latencies.max() ?? 0) * 1000)) ms after it was sent; about \(rssPerClient) bytes of resident memory per stream (server and client in this process)"
            )
        }
    }

    /// This process's resident memory, from `/proc/self/statm`.
    static func residentBytes() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let pages = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
