import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import ServiceTestSupport
import Testing

@testable import CatalogService

/// `/v1/playable-items` over a real server and a real database file.
@Suite struct PlayableItemAPITests {
    static var valid: [String: Any] {
        [
            "title": "Caminandes", "description": "A llama and a fence.",
            "streamURL": "https://example.com/caminandes/master.m3u8", "thumbnailURL": "https://example.com/c.jpg", "durationSeconds": 146.5,
        ]
    }

    func create(_ catalog: TestCatalog, _ body: [String: Any] = valid) async throws -> PlayableItem {
        let response = try await catalog.client.send("POST", "/v1/playable-items", json: body)
        #expect(response.status == 201, "\(response.text)")
        return try response.decode()
    }

    @Test(arguments: TestEngine.all) func seededCatalogListsInCreationOrder(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let response = try await catalog.client.get("/v1/playable-items")
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "application/json")
            let page = try response.decode(Page<PlayableItem>.self)
            #expect(page.items.count == DemoCatalogCounts.items)
            #expect(page.nextCursor == nil)
            #expect(response.header("Link") == nil)
            #expect(page.items.first?.title == "Big Buck Bunny")
            #expect(page.items.map(\.createdAt) == page.items.map(\.createdAt).sorted())
        }
    }

    @Test(arguments: TestEngine.all) func pagesFollowCursorsAndLinkHeaders(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let first = try await catalog.client.get("/v1/playable-items?limit=5&sort=-createdAt")
            let page = try first.decode(Page<PlayableItem>.self)
            #expect(page.items.count == 5)
            let cursor = try #require(page.nextCursor)
            #expect(first.header("Link") == "</v1/playable-items?limit=5&sort=-createdAt&cursor=\(cursor)>; rel=\"next\"")
            // The next link keeps the other parameters as sent, drops empty pairs, and replaces
            // the cursor even when its name was percent-encoded.
            let second = try await catalog.client.get("/v1/playable-items?&limit=5&&sort=-createdAt&%63ursor=\(cursor)&")
            let next = try #require(try second.decode(Page<PlayableItem>.self).nextCursor)
            #expect(second.header("Link") == "</v1/playable-items?limit=5&sort=-createdAt&cursor=\(next)>; rel=\"next\"")
            let all = try await catalog.client.all("/v1/playable-items?limit=5&sort=-createdAt", as: PlayableItem.self)
            #expect(all.count == DemoCatalogCounts.items)
            #expect(Set(all.map(\.id)).count == all.count, "no item twice")
            #expect(all.map(\.createdAt) == all.map(\.createdAt).sorted(by: >))
        }
    }

    @Test(arguments: TestEngine.all) func sortByTitleIsCaseInsensitiveBothWays(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            _ = try await create(catalog, Self.valid.merging(["title": "aardvark"]) { $1 })
            let ascending = try await catalog.client.all("/v1/playable-items?sort=title&limit=3", as: PlayableItem.self)
            #expect(ascending.first?.title == "aardvark")
            #expect(ascending.map { $0.title.lowercased() } == ascending.map { $0.title.lowercased() }.sorted())
            let descending = try await catalog.client.all("/v1/playable-items?sort=-title&limit=4", as: PlayableItem.self)
            #expect(descending.map(\.id) == ascending.map(\.id).reversed())
        }
    }

    @Test(arguments: TestEngine.all) func cursorReusedWithAnotherSortIs400(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let page = try await catalog.client.get("/v1/playable-items?limit=2").decode(Page<PlayableItem>.self)
            let cursor = try #require(page.nextCursor)
            for query in ["sort=title", "sort=-createdAt", "q=bunny"] {
                let response = try await catalog.client.get("/v1/playable-items?limit=2&\(query)&cursor=\(cursor)")
                #expect(response.status == 400, "\(query)")
                #expect(response.problem?.code == "invalidParameter")
                #expect(response.problem?.detail?.contains("cursor") == true)
            }
            let garbage = try await catalog.client.get("/v1/playable-items?cursor=not-a-cursor")
            #expect(garbage.status == 400)
            let otherList = try await catalog.client.get("/v1/games?limit=2&cursor=\(cursor)")
            #expect(otherList.status == 400, "a cursor is bound to its list")
        }
    }

    @Test(arguments: ["limit=0", "limit=101", "limit=abc", "limit=-1", "limit=1.5", "sort=duration", "sort=", "q=", "page=2", "limit=2&limit=3", "near=1,2"])
    func invalidListParametersAre400NamingTheParameter(_ query: String) async throws {
        let catalog = try TestCatalog(seed: false)
        let response = try await catalog.client.get("/v1/playable-items?\(query)")
        #expect(response.status == 400)
        #expect(response.header("Content-Type") == "application/problem+json")
        let problem = try #require(response.problem)
        #expect(problem.code == "invalidParameter")
        let name = String(query.prefix { $0 != "=" })
        #expect(problem.detail?.contains("'\(name)'") == true, "\(problem.detail ?? "")")
    }

    @Test(arguments: TestEngine.all) func searchRanksByRelevance(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let bunny = try await catalog.client.get("/v1/playable-items?q=bunny").decode(Page<PlayableItem>.self)
            #expect(bunny.items.map(\.title) == ["Big Buck Bunny"])
            // "Blender" appears in several descriptions; a title match must rank first.
            _ = try await create(catalog, Self.valid.merging(["title": "Blender Reel", "description": "Showreel."]) { $1 })
            let blender = try await catalog.client.get("/v1/playable-items?q=blender").decode(Page<PlayableItem>.self)
            #expect(blender.items.count >= 4)
            #expect(blender.items.first?.title == "Blender Reel")
            let prefix = try await catalog.client.get("/v1/playable-items?q=ste").decode(Page<PlayableItem>.self)
            #expect(prefix.items.contains { $0.title == "Tears of Steel" })
            let paged = try await catalog.client.all("/v1/playable-items?q=blender&limit=1", as: PlayableItem.self)
            #expect(paged.map(\.id) == blender.items.map(\.id))
            let sorted = try await catalog.client.get("/v1/playable-items?q=blender&sort=title").decode(Page<PlayableItem>.self)
            #expect(sorted.items.map(\.title) == blender.items.map(\.title).sorted { $0.lowercased() < $1.lowercased() })
            let quotes = try await catalog.client.get("/v1/playable-items?q=%22bunny%20OR%20*%22")
            #expect(quotes.status == 200, "FTS syntax in q is never interpreted")
            for query in ["q=%20%20", "q=%3E%C2%80", "q=*%20-&sort=title"] {
                let nothing = try await catalog.client.get("/v1/playable-items?\(query)")
                #expect(nothing.status == 200, "\(query)")
                #expect(try nothing.decode(Page<PlayableItem>.self).items.isEmpty, "no letter or digit: nothing to match (\(query))")
            }
        }
    }

    @Test(arguments: TestEngine.all) func getReturnsETagAndHonoursIfNoneMatch(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await create(catalog)
            let response = try await catalog.client.get("/v1/playable-items/\(item.id)")
            #expect(response.status == 200)
            // An item's counts change without a new version: its tag is the version and a digest.
            let tag = try #require(response.header("ETag"))
            #expect(tag.hasPrefix("\"1-") && tag.count == 20)
            #expect(try response.decode(PlayableItem.self) == item)
            let notModified = try await catalog.client.get("/v1/playable-items/\(item.id)", headers: ["If-None-Match": tag])
            #expect(notModified.status == 304)
            #expect(notModified.body.isEmpty)
            #expect(notModified.header("ETag") == tag)
            let weak = try await catalog.client.get("/v1/playable-items/\(item.id)", headers: ["If-None-Match": "W/\(tag), \"7\""])
            #expect(weak.status == 304)
            let version = try await catalog.client.get("/v1/playable-items/\(item.id)", headers: ["If-None-Match": "\"1\""])
            #expect(version.status == 200)
            let changed = try await catalog.client.get("/v1/playable-items/\(item.id)", headers: ["If-None-Match": "\"2\""])
            #expect(changed.status == 200)
            for lookalike in ["\"01\"", "\"+1\"", "\"1.0\""] {
                let response = try await catalog.client.get("/v1/playable-items/\(item.id)", headers: ["If-None-Match": lookalike])
                #expect(response.status == 200, "tags compare as text: \(lookalike)")
            }
            let commaInTag = try await catalog.client.get("/v1/playable-items/\(item.id)", headers: ["If-None-Match": "W/\",x,\", \(tag)"])
            #expect(commaInTag.status == 304, "a comma inside a quoted tag is part of the tag")
            let malformed = try await catalog.client.get("/v1/playable-items/\(item.id)", headers: ["If-None-Match": "1"])
            #expect(malformed.status == 400)
            let head = try await catalog.client.send("HEAD", "/v1/playable-items/\(item.id)")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(head.header("Content-Length") == response.header("Content-Length"))
        }
    }

    @Test(arguments: TestEngine.all) func malformedIdIs400AndUnknownIs404(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let malformed = try await catalog.client.get("/v1/playable-items/not-a-uuid")
            #expect(malformed.status == 400)
            #expect(malformed.problem?.code == "invalidId")
            let unknown = try await catalog.client.get("/v1/playable-items/\(CatalogID())")
            #expect(unknown.status == 404)
            #expect(unknown.problem?.code == "notFound")
            #expect(unknown.problem?.instance?.hasPrefix("/v1/playable-items/") == true)
            #expect(unknown.problem?.requestId != nil)
            #expect(unknown.problem?.requestId == unknown.header("X-Request-Id"))
            for method in ["PUT", "PATCH", "DELETE"] {
                let response = try await catalog.client.send(
                    method, "/v1/playable-items/\(CatalogID())", json: Self.valid,
                    contentType: method == "PATCH" ? "application/merge-patch+json" : "application/json")
                #expect(response.status == 404, "\(method)")
            }
        }
    }

    @Test(arguments: TestEngine.all) func createReturns201WithLocationETagAndBody(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let response = try await catalog.client.send("POST", "/v1/playable-items", json: Self.valid)
            #expect(response.status == 201)
            let item = try response.decode(PlayableItem.self)
            #expect(response.header("Location") == "/v1/playable-items/\(item.id)")
            // The version and a digest of the body, as a GET tags it (counts change without a version).
            #expect(response.header("ETag")?.hasPrefix("\"1-") == true)
            #expect(response.header("ETag") == (try await catalog.client.get("/v1/playable-items/\(item.id)")).header("ETag"))
            #expect(item.title == "Caminandes")
            #expect(item.durationSeconds == 146.5)
            #expect(item.version == 1)
            #expect(item.createdAt == item.updatedAt)
            #expect(item.id.rawValue == item.id.rawValue.lowercased())
            let fetched = try await catalog.client.get("/v1/playable-items/\(item.id)").decode(PlayableItem.self)
            #expect(fetched == item)
        }
    }

    @Test(arguments: TestEngine.all) func invalidBodyIs422ListingEveryField(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let body: [String: Any] = [
                "title": "", "description": String(repeating: "d", count: 5001), "streamURL": "ftp://example.com/a",
                "thumbnailURL": 42, "durationSeconds": -1, "id": "x", "createdAt": "2020-01-01T00:00:00Z", "colour": "red",
            ]
            let response = try await catalog.client.send("POST", "/v1/playable-items", json: body)
            #expect(response.status == 422)
            let problem = try #require(response.problem)
            #expect(problem.code == "validationFailed")
            let codes = Dictionary(uniqueKeysWithValues: (problem.errors ?? []).map { ($0.pointer, $0.code) })
            #expect(
                codes == [
                    "/title": "tooShort", "/description": "tooLong", "/streamURL": "invalidURL", "/thumbnailURL": "invalidType",
                    "/durationSeconds": "outOfRange", "/id": "readOnly", "/createdAt": "readOnly", "/colour": "unknownField",
                ])
            let nul = try await catalog.client.send("POST", "/v1/playable-items", json: ["title": "a\u{0}b", "streamURL": "https://e.com/x"])
            #expect(nul.problem?.errors?.map(\.code) == ["invalidFormat"], "NUL is refused, not truncated in storage")
            let missing = try await catalog.client.send("POST", "/v1/playable-items", json: ["description": "no title"])
            #expect(Set(missing.problem?.errors?.map(\.pointer) ?? []) == ["/title", "/streamURL"])
            #expect(missing.problem?.errors?.allSatisfy { $0.code == "required" } == true)
            let longURL = try await catalog.client.send("POST", "/v1/playable-items", json: ["title": "t", "streamURL": "https://e.com/" + String(repeating: "a", count: 2048)])
            #expect(longURL.problem?.errors?.first?.code == "tooLong")
        }
    }

    @Test(arguments: TestEngine.all) func bodyMediaTypeAndSyntaxAreChecked(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let body = try JSONSerialization.data(withJSONObject: Self.valid)
            let text = try await catalog.client.send("POST", "/v1/playable-items", headers: ["Content-Type": "text/plain"], body: body)
            #expect(text.status == 415)
            #expect(text.problem?.code == "unsupportedMediaType")
            let charset = try await catalog.client.send("POST", "/v1/playable-items", headers: ["Content-Type": "application/json; charset=utf-8"], body: body)
            #expect(charset.status == 201)
            let latin = try await catalog.client.send("POST", "/v1/playable-items", headers: ["Content-Type": "application/json; charset=latin1"], body: body)
            #expect(latin.status == 415)
            let malformed = try await catalog.client.send("POST", "/v1/playable-items", headers: ["Content-Type": "application/json"], body: Data("{\"title\":".utf8))
            #expect(malformed.status == 400)
            #expect(malformed.problem?.code == "malformedJSON")
            let duplicate = try await catalog.client.send(
                "POST", "/v1/playable-items", headers: ["Content-Type": "application/json"],
                body: Data(#"{"title":"a","title":"b","streamURL":"https://e.com/x"}"#.utf8))
            #expect(duplicate.status == 400)
            #expect(duplicate.problem?.detail?.contains("duplicate member 'title'") == true)
            let array = try await catalog.client.send("POST", "/v1/playable-items", json: [1, 2])
            #expect(array.status == 400)
            let empty = try await catalog.client.send("POST", "/v1/playable-items", headers: ["Content-Type": "application/json"], body: Data())
            #expect(empty.status == 400)
            #expect(empty.problem?.code == "bodyRequired")
            let boolean = try await catalog.client.send("POST", "/v1/playable-items", json: Self.valid.merging(["durationSeconds": true]) { $1 })
            #expect(boolean.problem?.errors?.first?.code == "invalidType", "a boolean is not a number")
        }
    }

    @Test(arguments: TestEngine.all) func putReplacesAndHonoursIfMatch(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await create(catalog)
            let replacement: [String: Any] = ["title": "Caminandes 2", "streamURL": "https://example.com/c2.m3u8"]
            let stale = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: replacement, headers: ["If-Match": "\"7\""])
            #expect(stale.status == 412)
            #expect(stale.header("ETag") == "\"1\"")
            let weak = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: replacement, headers: ["If-Match": "W/\"1\""])
            #expect(weak.status == 412, "If-Match uses strong comparison")
            let badHeader = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: replacement, headers: ["If-Match": "1"])
            #expect(badHeader.status == 400)
            let response = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: replacement, headers: ["If-Match": "\"1\""])
            #expect(response.status == 200)
            #expect(response.header("ETag")?.hasPrefix("\"2-") == true)
            let replaced = try response.decode(PlayableItem.self)
            #expect(replaced.title == "Caminandes 2")
            #expect(replaced.description == "")
            #expect(replaced.thumbnailURL == nil)
            #expect(replaced.durationSeconds == nil)
            #expect(replaced.version == 2)
            #expect(replaced.createdAt == item.createdAt)
            #expect(replaced.updatedAt >= item.updatedAt)
            let star = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: replacement, headers: ["If-Match": "*"])
            #expect(star.status == 200)
            #expect(star.header("ETag")?.hasPrefix("\"3-") == true)
            let invalid = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: ["title": "only"])
            #expect(invalid.status == 422)
            let noneMatchAny = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: replacement, headers: ["If-None-Match": "*"])
            #expect(noneMatchAny.status == 412, "If-None-Match: * on an existing resource")
            let noneMatchCurrent = try await catalog.client.send("PUT", "/v1/playable-items/\(item.id)", json: replacement, headers: ["If-None-Match": "W/\"3\""])
            #expect(noneMatchCurrent.status == 412, "If-None-Match uses weak comparison")
            // Without its preconditions the request would be a 404, so they are ignored (RFC 9110 13.2.1).
            for method in ["PUT", "PATCH", "DELETE"] {
                let matchAnyUnknown = try await catalog.client.send(
                    method, "/v1/playable-items/\(CatalogID())", json: replacement,
                    contentType: method == "PATCH" ? "application/merge-patch+json" : "application/json",
                    headers: ["If-Match": "*"])
                #expect(matchAnyUnknown.status == 404, "\(method)")
            }
        }
    }

    @Test(arguments: TestEngine.all) func patchMergesAndRemovesWithNull(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await create(catalog)
            let patch: [String: Any] = ["description": "Updated.", "thumbnailURL": NSNull()]
            let wrongType = try await catalog.client.send("PATCH", "/v1/playable-items/\(item.id)", json: patch)
            #expect(wrongType.status == 415)
            #expect(wrongType.header("Accept-Patch") == "application/merge-patch+json")
            let response = try await catalog.client.send(
                "PATCH", "/v1/playable-items/\(item.id)", json: patch,
                contentType: "application/merge-patch+json", headers: ["If-Match": "\"1\""])
            #expect(response.status == 200, "\(response.text)")
            let patched = try response.decode(PlayableItem.self)
            #expect(patched.description == "Updated.")
            #expect(patched.thumbnailURL == nil)
            #expect(patched.title == item.title)
            #expect(patched.durationSeconds == item.durationSeconds)
            #expect(patched.version == 2)
            let readOnly = try await catalog.client.send(
                "PATCH", "/v1/playable-items/\(item.id)", json: ["id": "x", "version": 9],
                contentType: "application/merge-patch+json")
            #expect(readOnly.status == 422)
            #expect(Set(readOnly.problem?.errors?.map(\.code) ?? []) == ["readOnly"])
            let invalid = try await catalog.client.send(
                "PATCH", "/v1/playable-items/\(item.id)", json: ["title": NSNull()],
                contentType: "application/merge-patch+json")
            #expect(invalid.status == 422)
            #expect(invalid.problem?.errors?.first?.pointer == "/title")
            let stale = try await catalog.client.send(
                "PATCH", "/v1/playable-items/\(item.id)", json: ["title": "t"],
                contentType: "application/merge-patch+json", headers: ["If-Match": "\"1\""])
            #expect(stale.status == 412)
            let staleAndInvalid = try await catalog.client.send(
                "PATCH", "/v1/playable-items/\(item.id)", json: ["title": ""],
                contentType: "application/merge-patch+json", headers: ["If-Match": "\"1\""])
            #expect(staleAndInvalid.status == 422, "the content is checked before the preconditions, as for PUT")
            let unchanged = try await catalog.client.get("/v1/playable-items/\(item.id)").decode(PlayableItem.self)
            #expect(unchanged.version == 2, "failed patches change nothing")
        }
    }

    @Test(arguments: TestEngine.all) func deleteRemovesAndHonoursIfMatch(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await create(catalog)
            let stale = try await catalog.client.send("DELETE", "/v1/playable-items/\(item.id)", headers: ["If-Match": "\"2\""])
            #expect(stale.status == 412)
            let deleted = try await catalog.client.send("DELETE", "/v1/playable-items/\(item.id)", headers: ["If-Match": "\"1\""])
            #expect(deleted.status == 204)
            #expect(deleted.body.isEmpty)
            #expect(try await catalog.client.get("/v1/playable-items/\(item.id)").status == 404)
            #expect(try await catalog.client.send("DELETE", "/v1/playable-items/\(item.id)").status == 404)
            let search = try await catalog.client.get("/v1/playable-items?q=caminandes").decode(Page<PlayableItem>.self)
            #expect(search.items.isEmpty, "the search index follows deletes")
        }
    }

    @Test(arguments: TestEngine.all) func concurrentCreatesAreAllDurableAndDistinct(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let ids = try await withThrowingTaskGroup(of: CatalogID.self) { group in
                for index in 0..<64 {
                    group.addTask { try await create(catalog, Self.valid.merging(["title": "Item \(index)"]) { $1 }).id }
                }
                return try await group.reduce(into: Set<CatalogID>()) { $0.insert($1) }
            }
            #expect(ids.count == 64)
            let directory = catalog.directory
            try catalog.stop()
            // Reopen the same file: every acknowledged write is there.
            let reopened = try TestCatalog(seed: false, databaseDirectory: directory)
            let all = try await reopened.client.all("/v1/playable-items?limit=100", as: PlayableItem.self)
            #expect(Set(all.map(\.id)) == ids)
        }
    }

    @Test(arguments: TestEngine.all) func unknownRoutesAndMethodsAreProblems(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let unknown = try await catalog.client.get("/v1/nothing-here")
            #expect(unknown.status == 404)
            #expect(unknown.header("Content-Type") == "application/problem+json")
            let method = try await catalog.client.send("PUT", "/v1/playable-items", json: [:])
            #expect(method.status == 405)
            #expect(method.header("Allow") == "GET, HEAD, POST, OPTIONS")
        }
    }
}

/// Searches are bounded: eight words at most count, each of two letters or more a prefix.
@Suite struct SearchLimitTests {
    @Test(arguments: TestEngine.all) func searchesAreBoundedAndRunOffTheLoop(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            _ = try await Fixtures.items(catalog.api, 3)
            // Words past the eighth are ignored: the ninth ("zzz") matches nothing, yet the search finds every video.
            let nine = try await catalog.client.get("/v1/playable-items?q=vi%20vi%20vi%20vi%20vi%20vi%20vi%20vi%20zzz")
            #expect(try nine.decode(Page<PlayableItem>.self).items.count == 3)
            // "v" alone is a whole word (no title has it); "vi" is a prefix of "Video".
            #expect(try await catalog.client.get("/v1/playable-items?q=v").decode(Page<PlayableItem>.self).items.isEmpty)
            #expect(try await catalog.client.get("/v1/playable-items?q=vi").decode(Page<PlayableItem>.self).items.count == 3)
            // A percent-encoded parameter name is still a search (it runs on the read pool).
            #expect(try await catalog.client.get("/v1/playable-items?%71=vid").decode(Page<PlayableItem>.self).items.count == 3)
        }
    }

    /// Which list requests leave the event loop for the read pool: every search and
    /// geographic filter, however its name is spelled; never a plain page.
    @Test func searchesAndAreasRunOnTheReadPool() {
        let expensive = ["q=a", "limit=2&q=a", "%71=a", "%6Eear=1,2", "bbox=1,2,3,4", "&&q&", "n%65ar=1,2&limit=1"]
        let cheap = ["", "limit=2", "cursor=abc&sort=title", "qq=a", "%71q=a", "bboxx=1", "limit=q", "%ZZ=1"]
        for query in expensive {
            #expect(ListParameters.isExpensive(HTTPRequest(method: .GET, path: "/v1/playable-items", query: query)), "\(query)")
        }
        for query in cheap {
            #expect(!ListParameters.isExpensive(HTTPRequest(method: .GET, path: "/v1/playable-items", query: query)), "\(query)")
        }
        #expect(!ListParameters.isExpensive(HTTPRequest(method: .GET, path: "/v1/playable-items")))
    }
}
