import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// Comments and replies, and screen-shaped responses (`include`, `fields`), over a real
/// server through the client library (raw requests where the client cannot err).
@Suite struct CommentAPITests {
    @Test(arguments: TestEngine.all) func threadsRepliesAndTombstones(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let ids = try await Fixtures.items(api, 2)
            var posted: [CatalogModels.Comment] = []
            for index in 0..<5 {
                posted.append(try await api.comments.post(on: ids[0], CommentInput(body: "Comment \(index)\nline two")).value)
            }
            #expect(posted[0].deleted == false)
            #expect(posted[0].replyCount == 0)
            #expect(posted[0].parentId == nil)
            #expect(posted[0].body == "Comment 0\nline two", "stored and returned as given")
            // Newest first by default; oldest first with sort=createdAt; pages follow cursors.
            #expect(try await api.comments.list(on: ids[0]).items.map(\.id) == posted.reversed().map(\.id))
            var oldestFirst: [CatalogID] = []
            for try await comment in api.comments.all(on: ids[0], ListQuery(limit: 2, sort: "createdAt")) { oldestFirst.append(comment.id) }
            #expect(oldestFirst == posted.map(\.id))
            #expect(try await api.comments.list(on: ids[1]).items.isEmpty)
            await expectProblem(404, "notFound") { try await api.comments.list(on: CatalogID()) }
            await expectProblem(404, "notFound") { try await api.comments.post(on: CatalogID(), CommentInput(body: "b")) }

            // Replies: one level, on the same item, to a live comment.
            let parent = posted[0]
            let reply = try await api.comments.post(on: ids[0], CommentInput(body: "Reply", parentId: parent.id))
            let reply2 = try await api.comments.post(on: ids[0], CommentInput(body: "Reply 2", parentId: parent.id))
            #expect(reply.value.parentId == parent.id)
            let updatedParent = try await api.comments.get(parent.id)
            #expect(updatedParent.value.replyCount == 2)
            #expect(updatedParent.etag == "\"3\"", "each reply bumps the parent's version")
            #expect(try await api.comments.replies(to: parent.id).items.map(\.id) == [reply.value.id, reply2.value.id])
            #expect(try await api.comments.replies(to: parent.id, ListQuery(sort: "-createdAt")).items.map(\.id) == [reply2.value.id, reply.value.id])
            #expect(try await api.comments.list(on: ids[0]).items.count == 5, "replies are not top-level")
            await expectProblem(404) { try await api.comments.replies(to: CatalogID()) }
            var problem = await expectProblem(422) { try await api.comments.post(on: ids[0], CommentInput(body: "x", parentId: reply.value.id)) }
            #expect(problem?.errors?.map(\.code) == ["invalidParent"])
            #expect(problem?.errors?.map(\.pointer) == ["/parentId"])
            problem = await expectProblem(422) { try await api.comments.post(on: ids[1], CommentInput(body: "x", parentId: parent.id)) }
            #expect(problem?.errors?.map(\.code) == ["notFound"])
            problem = await expectProblem(422) { try await api.comments.post(on: ids[0], CommentInput(body: "x", parentId: CatalogID())) }
            #expect(problem?.errors?.map(\.code) == ["notFound"])

            // Deleting a comment with replies leaves a tombstone; its last reply removes it.
            try await api.comments.delete(parent.id)
            let tombstone = try await api.comments.get(parent.id).value
            #expect(tombstone.deleted)
            #expect(tombstone.body == nil)
            #expect(tombstone.replyCount == 2)
            #expect(try await api.comments.list(on: ids[0]).items.contains { $0.id == parent.id && $0.deleted })
            await expectProblem(409, "conflict") { try await api.comments.patch(parent.id, MergePatch().set("body", "revived")) }
            problem = await expectProblem(422) { try await api.comments.post(on: ids[0], CommentInput(body: "x", parentId: parent.id)) }
            #expect(problem?.errors?.map(\.code) == ["invalidParent"])
            try await api.comments.delete(parent.id)  // a tombstone stays while it has replies
            #expect(try await api.comments.get(parent.id).value.version == tombstone.version)
            try await api.comments.delete(reply.value.id)
            #expect(try await api.comments.get(parent.id).value.replyCount == 1)
            try await api.comments.delete(reply2.value.id)
            await expectProblem(404) { try await api.comments.get(parent.id) }
            // A comment without replies is simply gone.
            try await api.comments.delete(posted[1].id)
            await expectProblem(404) { try await api.comments.get(posted[1].id) }
        }
    }

    @Test(arguments: TestEngine.all) func largePagesEndEarlyAndTextIsStoredComposed(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let item = try await Fixtures.items(api, 1)[0]
            // 100 comments of 20,000 bytes each: a page of 100 would be 2 MB; pages stop at 1 MiB.
            let body = String(repeating: "😀", count: CommentInput.bodyLength.upperBound)
            for _ in 0..<100 { _ = try await api.comments.post(on: item, CommentInput(body: body)) }
            let first = try await catalog.client.get("/v1/playable-items/\(item)/comments?limit=100")
            #expect(first.status == 200)
            #expect(first.body.count < 1_100_000)
            let page = try first.decode(Page<CatalogModels.Comment>.self)
            #expect(page.items.count > 40 && page.items.count < 60, "\(page.items.count)")
            #expect(page.nextCursor != nil)
            var seen = Set<CatalogID>()
            for try await comment in api.comments.all(on: item, ListQuery(limit: 100)) { seen.insert(comment.id) }
            #expect(seen.count == 100, "following the cursors reaches every comment")

            // Stored in NFC; bidi controls refused in single-line fields, kept in multi-line ones.
            let game = try await api.games.create(GameInput(name: "Cafe\u{301} Racer", description: "\u{202E}reversed", imageName: "cafe"))
            #expect(Array(game.value.name.utf8) == Array("Caf\u{E9} Racer".utf8))
            #expect(game.value.description == "\u{202E}reversed")
            await expectProblem(422, "validationFailed") {
                try await api.games.create(GameInput(name: "admin\u{202E}nimda", imageName: "x"))
            }
            let zalgo = try await catalog.client.send(
                "POST", "/v1/playable-items/\(item)/comments",
                json: ["body": "a" + String(repeating: "\u{301}", count: 50_000)])
            #expect(zalgo.status == 422)
            #expect(String(decoding: zalgo.body, as: UTF8.self).contains("20000 bytes of UTF-8"))
        }
    }

    @Test(arguments: TestEngine.all) func editsValidationAndMethods(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let item = try await Fixtures.items(api, 1)[0]
            let comment = try await api.comments.post(on: item, CommentInput(body: "Frist"))
            #expect(comment.etag == "\"1\"")
            let edited = try await api.comments.patch(comment.value.id, MergePatch().set("body", "First"), ifMatch: comment.etag)
            #expect(edited.value.body == "First")
            #expect(edited.value.author == "Admin")
            #expect(edited.value.authorId == catalog.adminID)
            await expectProblem(412) { try await api.comments.patch(comment.value.id, MergePatch().set("body", "x"), ifMatch: comment.etag) }
            await expectProblem(412) { try await api.comments.delete(comment.value.id, ifMatch: comment.etag) }

            var problem = await expectProblem(422) {
                try await api.comments.post(on: item, CommentInput(body: String(repeating: "b", count: 5001)))
            }
            #expect(problem?.errors?.map(\.pointer) == ["/body"])
            #expect(problem?.errors?.map(\.code) == ["tooLong"])
            problem = await expectProblem(422) { try await api.comments.post(on: item, CommentInput(body: "")) }
            #expect(problem?.errors?.map(\.code) == ["tooShort"])
            let path = "/v1/playable-items/\(item)/comments"
            let unknown = try await catalog.client.send("POST", path, json: ["author": "a", "body": "b", "replyCount": 3, "rating": 5])
            #expect(unknown.problem?.errors?.map(\.code) == ["readOnly", "unknownField", "readOnly"], "the author is the caller")
            let badParent = try await catalog.client.send("POST", path, json: ["body": "b", "parentId": "42"])
            #expect(badParent.problem?.errors?.map(\.code) == ["invalidFormat"])
            let moveThread = try await catalog.client.send(
                "PATCH", "/v1/comments/\(comment.value.id)", json: ["parentId": CatalogID().rawValue],
                contentType: "application/merge-patch+json")
            #expect(moveThread.problem?.errors?.map(\.code) == ["readOnly"])
            for patch in [["": NSNull()], ["rating": NSNull()], ["id": NSNull()]] as [[String: Any]] {
                let nulled = try await catalog.client.send("PATCH", "/v1/comments/\(comment.value.id)", json: patch, contentType: "application/merge-patch+json")
                #expect(nulled.status == 422, "a null member that is not writable is still refused: \(patch)")
            }
            let put = try await catalog.client.send("PUT", "/v1/comments/\(comment.value.id)", json: ["body": "b"])
            #expect(put.status == 405)
            #expect(put.header("Allow")?.contains("PATCH") == true)
        }
    }
}

@Suite struct ShapedResponseTests {
    struct TitleOnly: Codable, Sendable, Hashable {
        let id: CatalogID
        let title: String
        let streamURL: URL?
        let description: String?
    }

    @Test(arguments: TestEngine.all) func includeEmbedsBoundedFirstPagesWithWorkingCursors(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let ids = try await Fixtures.items(api, 3)
            let playlist = try await api.playlists.create(PlaylistInput(title: "Long")).value.id
            _ = try await api.entries(of: playlist).replace(with: (0..<60).map { ids[$0 % 3] })
            let shaped = try await api.playlists.get(playlist, include: ["entries"])
            #expect(shaped.value.entryCount == 60)
            let embedded = try #require(shaped.value.entries)
            #expect(embedded.items.map(\.position) == Array(0..<50))
            let cursor = try #require(embedded.nextCursor)
            let rest = try await api.entries(of: playlist).list(ListQuery(cursor: cursor))
            #expect(rest.items.map(\.position) == Array(50..<60))
            #expect(rest.nextCursor == nil)

            // The tag covers what is embedded: an item edit changes it, nothing else does.
            #expect(shaped.etag.hasPrefix("\"\(shaped.value.version)-"))
            let path = "/v1/playlists/\(playlist)?include=entries"
            #expect(try await catalog.client.get(path, headers: ["If-None-Match": shaped.etag]).status == 304)
            _ = try await api.playableItems.patch(ids[1], MergePatch().set("title", "Renamed"))
            let changed = try await catalog.client.get(path, headers: ["If-None-Match": shaped.etag])
            #expect(changed.status == 200)
            #expect(changed.header("ETag") != shaped.etag)
            #expect(try await api.playlists.get(playlist).etag.hasPrefix("\"\(shaped.value.version)-"), "the playlist itself did not change")
            // Writes take the version any of its tags starts with.
            let reordered = try await api.entries(of: playlist).move(embedded.items[49].entryId, to: 0, ifMatch: shaped.etag)
            #expect(reordered.value.position == 0, "the tag of an included response names its version for If-Match")
            await expectProblem(412) { try await api.entries(of: playlist).replace(with: [], ifMatch: shaped.etag) }

            // A playable item with its comments and the playlists holding it.
            for index in 0..<3 { _ = try await api.comments.post(on: ids[0], CommentInput(body: "c\(index)")) }
            let item = try await api.playableItems.get(ids[0], include: ["comments", "playlists"]).value
            #expect(item.comments?.items.map(\.body) == ["c2", "c1", "c0"])
            #expect(item.playlists?.items.map(\.id) == [playlist])
            let plain = try await api.playableItems.get(ids[0]).value
            #expect(plain.comments == nil && plain.playlists == nil)

            for (query, parameter) in [
                ("include=reviews", "include"), ("include=comments,comments", "include"), ("include=", "include"),
                ("expand=comments", "expand"), ("include=comments&include=playlists", "include"),
            ] {
                let response = try await catalog.client.get("/v1/playable-items/\(ids[0])?\(query)")
                #expect(response.status == 400, "\(query)")
                #expect(response.problem?.detail?.contains("'\(parameter)'") == true, "\(query): \(response.text)")
            }
            let listed = try await catalog.client.get("/v1/playable-items/\(ids[0])?include=reviews")
            #expect(listed.problem?.detail?.contains("comments, playlists") == true)
            #expect(try await catalog.client.get("/v1/playlists?include=entries").status == 400, "lists do not embed")
            #expect(try await catalog.client.get("/v1/playlists/\(CatalogID())?include=entries").status == 404)
        }
    }

    @Test(arguments: TestEngine.all) func fieldsProjectSingleResourcesAndLists(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let api = catalog.api
            let first = try await api.playableItems.list(ListQuery(limit: 1)).items[0]
            let projected = try await api.playableItems.get(first.id, fields: ["title", "streamURL"], as: TitleOnly.self)
            #expect(projected.value == TitleOnly(id: first.id, title: first.title, streamURL: first.streamURL, description: nil))
            let raw = try await catalog.client.get("/v1/playable-items/\(first.id)?fields=title")
            #expect(try JSONSerialization.jsonObject(with: raw.body) as? [String: String] == ["id": first.id.rawValue, "title": first.title])
            #expect(raw.header("ETag") != "\"\(first.version)\"")
            #expect(try await catalog.client.get("/v1/playable-items/\(first.id)?fields=title", headers: ["If-None-Match": raw.header("ETag") ?? ""]).status == 304)

            let page = try await api.playableItems.list(ListQuery(limit: 3, fields: ["title"]), as: TitleOnly.self)
            #expect(page.items.count == 3)
            #expect(page.items.allSatisfy { $0.streamURL == nil && $0.description == nil })
            let next = try await api.playableItems.list(ListQuery(limit: 3, cursor: page.nextCursor, fields: ["title"]), as: TitleOnly.self)
            #expect(Set(next.items.map(\.id)).isDisjoint(with: page.items.map(\.id)))

            let games = try await catalog.client.get("/v1/games?fields=name&limit=2")
            let names = try JSONSerialization.jsonObject(with: games.body) as? [String: Any]
            #expect((names?["items"] as? [[String: String]])?.allSatisfy { Set($0.keys) == ["id", "name"] } == true)
            let entries = try await catalog.client.get("/v1/playlists/\(CatalogID())/entries?fields=title")
            #expect(entries.status == 404)

            for path in [
                "/v1/playable-items/\(first.id)?fields=title,rating", "/v1/games?fields=title", "/v1/locations?fields=",
                "/v1/playable-items?fields=title,,id",
            ] {
                let response = try await catalog.client.get(path)
                #expect(response.status == 400, "\(path)")
                #expect(response.problem?.detail?.contains("'fields'") == true, "\(path)")
            }
            let unknownField = try await catalog.client.get("/v1/games?fields=title")
            #expect(unknownField.problem?.detail?.contains("createdAt, description, id, image, imageName, name, updatedAt, version") == true)
            #expect(try await catalog.client.get("/v1/games/\(CatalogID())?limit=3").status == 400, "single GETs refuse unknown parameters")
        }
    }
}
