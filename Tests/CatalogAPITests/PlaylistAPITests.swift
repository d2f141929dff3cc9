import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// Playlists and their entries over a real server, through the client library.
@Suite struct PlaylistAPITests {
    /// The entries' item ids in position order, after checking positions are 0…n−1.
    /// `read` again (four times at most) while the server refuses it as more work than one
    /// request may take (503, the read budget): under the whole suite a starved event loop
    /// can pass a read's second of wall clock. What is read is checked as before.
    static func patiently<T>(_ read: () async throws -> T) async throws -> T {
        for _ in 0..<4 {
            do {
                return try await read()
            } catch let CatalogClientError.problem(problem) where problem.status == 503 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        return try await read()
    }

    static func order(_ api: CatalogClient, _ playlistID: CatalogID, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [CatalogID] {
        var entries: [PlaylistEntry] = []
        for try await entry in api.entries(of: playlistID).all(ListQuery(limit: 7)) { entries.append(entry) }
        #expect(entries.map(\.position) == Array(0..<entries.count), "positions are dense", sourceLocation: sourceLocation)
        #expect(entries.allSatisfy { $0.playlistId == playlistID }, sourceLocation: sourceLocation)
        let playlist = try await api.playlists.get(playlistID).value
        #expect(playlist.entryCount == entries.count, sourceLocation: sourceLocation)
        return entries.map(\.playableItem.id)
    }

    @Test(arguments: TestEngine.all) func playlistCRUDListSearchAndFilter(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let created = try await api.playlists.create(PlaylistInput(title: "Road trip", description: "Long drives"))
            #expect(created.etag == "\"1\"")
            #expect(created.value.entryCount == 0)
            #expect(created.value.entries == nil)
            let other = try await api.playlists.create(PlaylistInput(title: "Arcade nights"))
            let patched = try await api.playlists.patch(created.value.id, MergePatch().set("title", "Road trips"), ifMatch: created.etag)
            #expect(patched.value.title == "Road trips")
            #expect(patched.etag == "\"2\"")
            await expectProblem(412, "preconditionFailed") { try await api.playlists.replace(created.value.id, with: PlaylistInput(title: "x"), ifMatch: created.etag) }
            #expect(try await api.playlists.list(ListQuery(sort: "title")).items.map(\.title) == ["Arcade nights", "Road trips"])
            #expect(try await api.playlists.list(ListQuery(search: "drives")).items.map(\.id) == [created.value.id])
            let item = try await Fixtures.items(api, 1)[0]
            _ = try await api.entries(of: other.value.id).add(item)
            #expect(try await api.playlists.list(ListQuery(playableItemId: item)).items.map(\.id) == [other.value.id])
            #expect(try await api.playlists.list(ListQuery(playableItemId: CatalogID())).items.isEmpty)

            // entryCount and entries are the server's.
            let readOnly = try await catalog.client.send("POST", "/v1/playlists", json: ["title": "t", "entryCount": 3, "entries": []])
            #expect(readOnly.status == 422)
            #expect(readOnly.problem?.errors?.map(\.code) == ["readOnly", "readOnly"])
            #expect(try await catalog.client.get("/v1/playlists?playableItemId=nope").problem?.detail?.contains("playableItemId") == true)

            try await api.playlists.delete(other.value.id, ifMatch: "\"2\"")
            await expectProblem(404, "notFound") { try await api.entries(of: other.value.id).list() }
            await expectProblem(404, "notFound") { try await api.playlists.get(other.value.id) }
        }
    }

    @Test(arguments: TestEngine.all) func entriesInsertMoveRemoveReplaceAndNext(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let ids = try await Fixtures.items(api, 4)
            let playlist = try await api.playlists.create(PlaylistInput(title: "Mix")).value.id
            let entries = api.entries(of: playlist)

            let first = try await entries.add(ids[0])
            #expect(first.etag == "\"2\"", "an entry change bumps the playlist's version")
            #expect(first.value.position == 0)
            #expect(first.value.playableItem.id == ids[0])
            let second = try await entries.add(ids[1], at: 0, ifMatch: first.etag)
            #expect(second.etag == "\"3\"")
            _ = try await entries.add(ids[2], at: 1)
            _ = try await entries.add(ids[0])  // the same item twice
            #expect(try await Self.order(api, playlist) == [ids[1], ids[2], ids[0], ids[0]])

            // Positions out of range, unknown and malformed items: 422 naming the field.
            var problem = await expectProblem(422, "validationFailed") { try await entries.add(ids[3], at: 5) }
            #expect(problem?.errors?.map(\.pointer) == ["/position"])
            problem = await expectProblem(422) { try await entries.add(ids[3], at: -1) }
            #expect(problem?.errors?.map(\.pointer) == ["/position"])
            problem = await expectProblem(422) { try await entries.add(CatalogID()) }
            #expect(problem?.errors?.map(\.code) == ["notFound"])
            #expect(problem?.errors?.map(\.pointer) == ["/playableItemId"])
            let malformed = try await catalog.client.send("POST", "/v1/playlists/\(playlist)/entries", json: ["playableItemId": "x", "position": 1.5])
            #expect(malformed.problem?.errors?.map(\.pointer) == ["/playableItemId", "/position"])
            await expectProblem(404, "notFound") { try await api.entries(of: CatalogID()).add(ids[0]) }
            let version = try await api.playlists.get(playlist).value.version
            #expect(version == 5, "failed writes change nothing")

            // Move both ways, then to the same place.
            let moved = try await entries.move(first.value.entryId, to: 3)
            #expect(moved.value.position == 3)
            #expect(moved.etag == "\"6\"")
            #expect(try await entries.list().items.map(\.entryId).last == first.value.entryId)
            #expect(try await Self.order(api, playlist) == [ids[1], ids[2], ids[0], ids[0]])
            _ = try await entries.move(first.value.entryId, to: 0)
            #expect(try await Self.order(api, playlist) == [ids[0], ids[1], ids[2], ids[0]])
            problem = await expectProblem(422) { try await entries.move(first.value.entryId, to: 4) }
            #expect(problem?.errors?.map(\.pointer) == ["/position"])
            await expectProblem(404, "notFound") { try await entries.move(CatalogID(), to: 0) }
            let wrongMedia = try await catalog.client.send("PATCH", "/v1/playlists/\(playlist)/entries/\(first.value.entryId)", json: ["position": 1])
            #expect(wrongMedia.status == 415)
            #expect(wrongMedia.header("Accept-Patch") == "application/merge-patch+json")

            // Up next, to the end.
            var played: [CatalogID] = [ids[0]]
            var current = first.value.entryId
            while let next = try await entries.next(after: current) {
                played.append(next.playableItem.id)
                current = next.entryId
            }
            #expect(played == [ids[0], ids[1], ids[2], ids[0]])
            let end = try await catalog.client.get("/v1/playlists/\(playlist)/entries/\(current)/next")
            #expect(end.status == 404)
            #expect(end.problem?.code == "endOfPlaylist")
            await expectProblem(404, "notFound") { try await entries.get(CatalogID()) }
            await expectProblem(404, "notFound") { try await entries.next(after: CatalogID()) }

            // Remove closes the gap.
            let tag = try await entries.remove(second.value.entryId)
            #expect(tag == "\"8\"")
            #expect(try await Self.order(api, playlist) == [ids[0], ids[2], ids[0]])
            await expectProblem(404) { try await entries.remove(second.value.entryId) }

            // Replace: kept items keep their entry ids.
            let before = try await entries.list().items
            let replaced = try await entries.replace(with: [ids[3], ids[0], ids[2]])
            #expect(replaced.value.entryCount == 3)
            #expect(replaced.etag == "\"9\"")
            let after = try await entries.list().items
            #expect(after.map(\.playableItem.id) == [ids[3], ids[0], ids[2]])
            #expect(after[1].entryId == before[0].entryId)
            #expect(after[2].entryId == before[1].entryId)
            #expect(!before.map(\.entryId).contains(after[0].entryId))
            problem = await expectProblem(422) { try await entries.replace(with: [ids[0], CatalogID(), ids[1], CatalogID()]) }
            #expect(problem?.errors?.map(\.pointer) == ["/playableItemIds/1", "/playableItemIds/3"])
            let tooMany = try await catalog.client.send(
                "PUT", "/v1/playlists/\(playlist)/entries",
                json: ["playableItemIds": Array(repeating: ids[0].rawValue, count: 10_001)])
            #expect(tooMany.problem?.errors?.map(\.code) == ["tooLong"])
            #expect(try await entries.replace(with: []).value.entryCount == 0)
            #expect(try await Self.order(api, playlist).isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func everyEntryWriteHonoursIfMatchOnThePlaylist(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let ids = try await Fixtures.items(api, 2)
            let playlist = try await api.playlists.create(PlaylistInput(title: "Guarded"))
            let entries = api.entries(of: playlist.value.id)
            let added = try await entries.add(ids[0], ifMatch: playlist.etag)
            let stale = playlist.etag
            await expectProblem(412) { try await entries.add(ids[1], ifMatch: stale) }
            await expectProblem(412) { try await entries.move(added.value.entryId, to: 0, ifMatch: stale) }
            await expectProblem(412) { try await entries.remove(added.value.entryId, ifMatch: stale) }
            await expectProblem(412) { try await entries.replace(with: [], ifMatch: stale) }
            let failed = try await catalog.client.send(
                "DELETE", "/v1/playlists/\(playlist.value.id)/entries/\(added.value.entryId)",
                headers: ["If-Match": stale])
            #expect(failed.header("ETag") == added.etag, "a 412 names the current version")
            // A read's tag is the reader's own, made from the same version.
            #expect(try await api.playlists.get(playlist.value.id).etag.hasPrefix(added.etag.dropLast() + "-"))
            // A playlist's tag from a write works for the next one.
            let moved = try await entries.move(added.value.entryId, to: 0, ifMatch: added.etag)
            _ = try await entries.replace(with: [ids[1]], ifMatch: moved.etag)
        }
    }

    @Test(arguments: TestEngine.all) func concurrentReordersFromTwoClientsOneWinsTheOtherGets412(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let ids = try await Fixtures.items(api, 5)
            let playlist = try await api.playlists.create(PlaylistInput(title: "Contested")).value.id
            let entries = api.entries(of: playlist)
            _ = try await entries.replace(with: ids)
            let appA = CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(catalog.adminKey), headers: ["X-App": "a"])
            let appB = CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(catalog.adminKey), headers: ["X-App": "b"])
            for round in 0..<25 {
                let tag = try await api.playlists.get(playlist).etag
                let listed = try await entries.list().items
                let (a, b) = (listed[round % 5].entryId, listed[(round + 2) % 5].entryId)
                async let first = Self.outcome { try await appA.entries(of: playlist).move(a, to: 4, ifMatch: tag) }
                async let second = Self.outcome { try await appB.entries(of: playlist).move(b, to: 0, ifMatch: tag) }
                let outcomes = await [first, second]
                #expect(outcomes.filter { $0 == 200 }.count == 1, "round \(round): \(outcomes)")
                #expect(outcomes.filter { $0 == 412 }.count == 1, "round \(round): \(outcomes)")
                #expect(Set(try await Self.order(api, playlist)) == Set(ids))
            }
        }
    }

    static func outcome(_ body: () async throws -> some Any) async -> Int {
        do {
            _ = try await body()
            return 200
        } catch {
            return (error as? CatalogClientError)?.problem?.status ?? -1
        }
    }

    @Test(arguments: TestEngine.all) func positionsStayDenseUnderRandomInsertsMovesAndDeletes(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let ids = try await Fixtures.items(api, 6)
            let playlist = try await api.playlists.create(PlaylistInput(title: "Random")).value.id
            let entries = api.entries(of: playlist)
            var generator = SeededGenerator(seed: 0x5EED)
            // The expected order, as (entry id, item id).
            var model: [(entry: CatalogID, item: CatalogID)] = []
            for step in 0..<250 {
                let choice = generator.next() % 10
                if model.isEmpty || choice < 4 {
                    let item = ids[Int(generator.next() % UInt64(ids.count))]
                    let position = Int(generator.next() % UInt64(model.count + 1))
                    let added = try await entries.add(item, at: generator.next() % 4 == 0 ? nil : position)
                    model.insert((added.value.entryId, item), at: added.value.position)
                } else if choice < 7 {
                    let from = Int(generator.next() % UInt64(model.count))
                    let to = Int(generator.next() % UInt64(model.count))
                    _ = try await entries.move(model[from].entry, to: to)
                    model.insert(model.remove(at: from), at: to)
                } else if choice < 9 {
                    let index = Int(generator.next() % UInt64(model.count))
                    try await entries.remove(model[index].entry)
                    model.remove(at: index)
                } else {
                    let order = model.map(\.item).shuffled(using: &generator).dropLast(Int(generator.next() % 2))
                    _ = try await entries.replace(with: Array(order))
                    model = try await Self.patiently { try await entries.list(ListQuery(limit: 100)) }.items.map { ($0.entryId, $0.playableItem.id) }
                    #expect(model.map(\.item) == Array(order), "step \(step)")
                }
                let listed = try await Self.patiently { try await Self.order(api, playlist) }
                #expect(listed == model.map(\.item), "step \(step)")
                let entryIDs = try await Self.patiently { try await entries.list(ListQuery(limit: 100)) }.items.map(\.entryId)
                #expect(entryIDs == model.map(\.entry), "step \(step)")
            }
        }
    }

    @Test(arguments: TestEngine.all) func deletingAnItemRemovesItsEntriesEverywhereAndItsComments(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = catalog.api
            let ids = try await Fixtures.items(api, 3)
            let one = try await api.playlists.create(PlaylistInput(title: "One")).value.id
            let two = try await api.playlists.create(PlaylistInput(title: "Two")).value.id
            let untouched = try await api.playlists.create(PlaylistInput(title: "Untouched")).value.id
            _ = try await api.entries(of: one).replace(with: [ids[0], ids[1], ids[0], ids[2], ids[1]])
            _ = try await api.entries(of: two).replace(with: [ids[1]])
            _ = try await api.entries(of: untouched).replace(with: [ids[0], ids[2]])
            let comment = try await api.comments.post(on: ids[1], CommentInput(body: "Nice"))
            _ = try await api.comments.post(on: ids[1], CommentInput(body: "Indeed", parentId: comment.value.id))
            let versions = (try await api.playlists.get(one).value.version, try await api.playlists.get(untouched).value.version)

            try await api.playableItems.delete(ids[1])
            #expect(try await Self.order(api, one) == [ids[0], ids[0], ids[2]])
            #expect(try await Self.order(api, two).isEmpty)
            #expect(try await Self.order(api, untouched) == [ids[0], ids[2]])
            #expect(try await api.playlists.get(one).value.version == versions.0 + 1)
            #expect(try await api.playlists.get(untouched).value.version == versions.1)
            await expectProblem(404) { try await api.comments.get(comment.value.id) }
            await expectProblem(404) { try await api.comments.list(on: ids[1]) }
        }
    }
}

/// What one user may make, and what never reaches the writer.
@Suite struct QuotaTests {
    @Test(arguments: TestEngine.all) func aUserOwnsAtMostAThousandPlaylists(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Quinn")
            let client = catalog.client(key: member.key)
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<PlaylistInput.maxPerUser {
                    group.addTask { try await client.send("POST", "/v1/playlists", json: ["title": "List \(index)"]).status }
                }
                for try await status in group { #expect(status == 201) }
            }
            let over = try await client.send("POST", "/v1/playlists", json: ["title": "One too many"])
            #expect(over.status == 409)
            #expect(try over.decode(Problem.self).code == "quotaExceeded")
            // Another user's quota is their own.
            #expect(try await catalog.client.send("POST", "/v1/playlists", json: ["title": "Admin's"]).status == 201)
        }
    }

    @Test(arguments: TestEngine.all) func aBadPatchIsRefusedBeforeTheStoreIsAsked(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            // No such game: the patch's own faults are found first, without the writer.
            let response = try await catalog.client.send(
                "PATCH", "/v1/games/\(CatalogID())", json: ["name": "", "imageName": "../x"],
                contentType: "application/merge-patch+json")
            #expect(response.status == 422)
            #expect(try response.decode(Problem.self).errors?.map(\.pointer) == ["/name", "/imageName"])
            let nulled = try await catalog.client.send("PATCH", "/v1/games/\(CatalogID())", json: ["name": NSNull()], contentType: "application/merge-patch+json")
            #expect(nulled.status == 422)
            // A good patch of a missing game is still a 404.
            #expect(try await catalog.client.send("PATCH", "/v1/games/\(CatalogID())", json: ["name": "Fine"], contentType: "application/merge-patch+json").status == 404)
        }
    }
}

/// A playlist holds at most 5,000 entries, and a user's playlists 50,000 in all.
@Suite struct PlaylistLimitTests {
    @Test(arguments: TestEngine.all) func aUsersPlaylistsHoldAtMostFiftyThousandEntries(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Collector")
            let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Loop", streamURL: URL(string: "https://example.com/l")!)).value.id
            let client = catalog.client(key: member.key)
            var playlists: [String] = []
            for index in 0..<11 {
                let created = try await client.send("POST", "/v1/playlists", json: ["title": "P\(index)"])
                playlists.append(try created.decode(Playlist.self).id.rawValue)
            }
            let full = Array(repeating: item.rawValue, count: PlaylistOrder.maxEntries)
            let tooMany = try await client.send("PUT", "/v1/playlists/\(playlists[0])/entries", json: ["playableItemIds": full + [item.rawValue]])
            #expect(tooMany.status == 422, "5,001 entries")
            for playlist in playlists.prefix(10) {
                #expect(try await client.send("PUT", "/v1/playlists/\(playlist)/entries", json: ["playableItemIds": full]).status == 200)
            }
            let over = try await client.send("PUT", "/v1/playlists/\(playlists[10])/entries", json: ["playableItemIds": [item.rawValue]])
            #expect(over.status == 409)
            #expect(over.problem?.code == "quotaExceeded")
            let added = try await client.send("POST", "/v1/playlists/\(playlists[10])/entries", json: ["playableItemId": item.rawValue])
            #expect(added.problem?.code == "quotaExceeded")
            let atLimit = try await client.send("POST", "/v1/playlists/\(playlists[0])/entries", json: ["playableItemId": item.rawValue])
            #expect(atLimit.status == 409 && atLimit.problem?.code == "conflict", "a full playlist")
            // Room made in one playlist is room in another.
            #expect(try await client.send("PUT", "/v1/playlists/\(playlists[0])/entries", json: ["playableItemIds": []]).status == 200)
            #expect(try await client.send("POST", "/v1/playlists/\(playlists[10])/entries", json: ["playableItemId": item.rawValue]).status == 201)
        }
    }
}
