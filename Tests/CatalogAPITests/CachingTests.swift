import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

@testable import CatalogService

/// Every answer states how it may be cached, and a cache shared by several users (a
/// browser profile, a `URLCache`) can never show one user what another was shown.
@Suite struct CachingTests {
    @Test(arguments: TestEngine.all) func eachUsersProfileHasATagOfItsOwn(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Mo")
            let admin = try await catalog.client.get("/v1/me")
            let mine = try await catalog.client(key: member.key).get("/v1/me")
            #expect(try admin.decode(User.self).version == mine.decode(User.self).version, "both profiles are at version 1")
            for response in [admin, mine] {
                #expect(response.header("Cache-Control") == "private, no-cache")
                #expect(response.header("Vary") == "Authorization")
            }
            let adminTag = try #require(admin.header("ETag")), memberTag = try #require(mine.header("ETag"))
            #expect(adminTag != memberTag)
            #expect(adminTag.hasPrefix("\"1-") && memberTag.hasPrefix("\"1-"))
            // What a shared browser cache sends for the member after the admin's visit: not a 304.
            let revalidated = try await catalog.client(key: member.key).get("/v1/me", headers: ["If-None-Match": adminTag])
            #expect(revalidated.status == 200)
            #expect(try revalidated.decode(User.self).id == member.id)
            let own = try await catalog.client(key: member.key).get("/v1/me", headers: ["If-None-Match": memberTag])
            #expect(own.status == 304)
            #expect(own.header("ETag") == memberTag)
            #expect(own.header("Cache-Control") == "private, no-cache" && own.header("Vary") == "Authorization")
            // Another user's public profile: its tag for the viewer too, and its version still names it for writes.
            let seen = try await catalog.anonymous.get("/v1/users/\(member.id)")
            #expect(seen.header("ETag") != memberTag)
            let patched = try await catalog.client(key: member.key).send(
                "PATCH", "/v1/me", json: ["displayName": "Moe"], contentType: "application/merge-patch+json",
                headers: ["If-Match": memberTag])
            #expect(patched.status == 200)
            #expect(patched.header("Cache-Control") == "no-store")
        }
    }

    @Test(arguments: TestEngine.all) func publicReadsRevalidateAndListsHaveAValidator(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let list = try await catalog.anonymous.get("/v1/games?limit=2")
            #expect(list.header("Cache-Control") == "no-cache")
            #expect(list.header("Vary") == "Accept-Encoding", "the same for everyone, in either coding")
            let tag = try #require(list.header("ETag"))
            #expect(tag.hasPrefix("W/\""), "a weak tag over the page")
            let unchanged = try await catalog.anonymous.get("/v1/games?limit=2", headers: ["If-None-Match": tag])
            #expect(unchanged.status == 304)
            #expect(unchanged.body.isEmpty && unchanged.header("ETag") == tag && unchanged.header("Cache-Control") == "no-cache")
            let game = try #require(try list.decode(Page<Game>.self).items.first)
            _ = try await catalog.api.games.patch(game.id, MergePatch().set("name", "Renamed"))
            #expect(try await catalog.anonymous.get("/v1/games?limit=2", headers: ["If-None-Match": tag]).status == 200)
            let one = try await catalog.anonymous.get("/v1/games/\(game.id)")
            #expect(one.header("Cache-Control") == "no-cache" && one.header("ETag") == "\"2\"")
            // The same list as another caller: the same public answer.
            #expect(try await catalog.client.get("/v1/games?limit=2").header("ETag") == (try await catalog.anonymous.get("/v1/games?limit=2")).header("ETag"))
            // Playlists show their owner what others do not see: per caller.
            let playlists = try await catalog.anonymous.get("/v1/playlists")
            #expect(playlists.header("Cache-Control") == "private, no-cache" && playlists.header("Vary") == "Authorization")
            #expect(playlists.header("ETag") != (try await catalog.client.get("/v1/playlists")).header("ETag"))
            for tag in [playlists.header("ETag"), try await catalog.client.get("/v1/users").header("ETag")] {
                #expect(tag?.wholeMatch(of: /W\/"[0-9a-f]{16}"/) != nil, "a list's tag for a viewer is still a digest alone: \(tag ?? "")")
            }
            // An include of what may be hidden is per caller; the item alone is not.
            let item = try #require(try await catalog.anonymous.get("/v1/playable-items?limit=1").decode(Page<PlayableItem>.self).items.first)
            #expect(try await catalog.anonymous.get("/v1/playable-items/\(item.id)").header("Cache-Control") == "no-cache")
            #expect(try await catalog.anonymous.get("/v1/playable-items/\(item.id)?include=playlists").header("Cache-Control") == "private, no-cache")
            // Health, readiness and errors are never stored.
            for path in ["/healthz", "/readyz", "/v1/games/\(CatalogID())", "/nowhere"] {
                #expect(try await catalog.anonymous.get(path).header("Cache-Control") == "no-store", "\(path)")
            }
            #expect(try await catalog.client.get("/metrics").header("Cache-Control") == "no-store")
        }
    }

    @Test(arguments: TestEngine.all) func anOperatorMaySetAShortMaxAge(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog { $0.publicMaxAge = 30 }
            #expect(try await catalog.anonymous.get("/v1/games").header("Cache-Control") == "max-age=30")
            #expect(try await catalog.anonymous.get("/v1/me").header("Cache-Control") == "no-store", "a refusal")
            #expect(try await catalog.client.get("/v1/me").header("Cache-Control") == "private, no-cache")
        }
    }

    @Test(arguments: TestEngine.all) func whereReadsNeedACredentialNoReadIsShared(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog { $0.requireAuthForReads = true }
            let games = try await catalog.client.get("/v1/games")
            #expect(games.header("Cache-Control") == "private, no-cache" && games.header("Vary") == "Authorization, Accept-Encoding")
        }
    }

    @Test func theFeedNegotiatesByQuality() async throws {
        for (accept, stream) in [
            ("application/json;q=0.9, text/event-stream;q=0.1", false), ("text/event-stream", true), ("*/*", false),
            ("text/event-stream, application/json", false), ("application/json;q=0.5, text/event-stream", true),
            ("text/*", true), ("text/event-stream;q=0", false), ("*/*;q=0.2, text/event-stream;q=0.3", true),
            ("text/event-stream;q=0.3, */*;q=0.3", true), ("TEXT/EVENT-STREAM;Q=1", true),
        ] {
            #expect(ChangeFeed.prefersEvents([accept]) == stream, "\(accept)")
        }
        #expect(ChangeFeed.prefersEvents([]) == false)
        #expect(ChangeFeed.prefersEvents(["application/json;q=0.1", "text/event-stream;q=0.2"]) == true, "fields are one list")
    }

    @Test(arguments: TestEngine.all) func theFeedVariesByAcceptAndItsHeadAgreesWithItsGet(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let page = try await catalog.anonymous.get("/v1/changes?limit=1", headers: ["Accept": "application/json;q=0.9, text/event-stream;q=0.1"])
            #expect(page.status == 200 && page.header("Content-Type") == "application/json")
            #expect(page.header("Vary") == "Accept" && page.header("Cache-Control") == "no-store")
            let port = try #require(catalog.client.baseURL.port)
            let answer = try await Loopback.exchange(
                port: port,
                Array(
                    ("HEAD /v1/changes HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
                        + "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").utf8))
            let head = answer.components(separatedBy: "\r\n\r\n")[0]
            #expect(head.hasPrefix("HTTP/1.1 200 OK"))
            #expect(head.contains("Content-Type: text/event-stream") && head.contains("Vary: Accept") && head.contains("Transfer-Encoding: chunked"))
            #expect(!head.contains("Content-Length") && !head.contains("Connection: close"))
            #expect(answer.components(separatedBy: "\r\n\r\n")[1].hasPrefix("HTTP/1.1 200 OK"), "no body, and the connection serves on")
        }
    }
}
