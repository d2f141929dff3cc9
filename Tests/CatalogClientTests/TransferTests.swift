import CatalogClient
import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// Moving a catalog between servers: export, import with ids preserved, idempotence.
@Suite struct TransferTests {
    static func export(_ client: CatalogClient) async throws -> [CatalogRecord] {
        var records: [CatalogRecord] = []
        for try await record in client.exportRecords() { records.append(record) }
        return records
    }

    @Test(arguments: TestEngine.all) func exportImportRoundTripPreservesEverythingAndRunsTwiceWithoutChange(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let source = try TestCatalog()
            let api = source.api
            // Beyond the demo catalog: a reordered playlist with a repeat, a tombstone thread.
            let items = try await api.playableItems.list(ListQuery(limit: 3)).items.map(\.id)
            let playlist = try await api.playlists.create(PlaylistInput(title: "Mixed")).value
            _ = try await api.entries(of: playlist.id).replace(with: [items[2], items[0], items[2]])
            let comment = try await api.comments.post(on: items[1], CommentInput(body: "Tombstone soon"))
            _ = try await api.comments.post(on: items[1], CommentInput(body: "Reply", parentId: comment.value.id))
            try await api.comments.delete(comment.value.id)

            let exported = try await Self.export(api)
            let kinds = exported.map { record -> String in
                switch record {
                case .game: "game"
                case .location: "location"
                case .playableItem: "playableItem"
                case .playlist: "playlist"
                case .comment: "comment"
                }
            }
            #expect(kinds == kinds.sorted { CatalogRecord.types.firstIndex(of: $0)! < CatalogRecord.types.firstIndex(of: $1)! }, "dependency order")

            let target = try TestCatalog(seed: false)
            let first = try await target.api.importRecords(exported)
            #expect(first == ImportSummary(created: exported.count))
            // Owners are users of the source, unknown to the target: their resources arrive without one.
            let unowned = exported.map { record -> CatalogRecord in
                switch record {
                case var .comment(comment):
                    comment.authorId = nil
                    return .comment(comment)
                case var .playlist(playlist):
                    playlist.ownerId = nil
                    return .playlist(playlist)
                default:
                    return record
                }
            }
            #expect(exported.contains { if case let .comment(comment) = $0 { comment.authorId == source.adminID } else { false } })
            #expect(try await Self.export(target.api) == unowned, "ids, content, times, versions, entry order and tombstones survive")
            let second = try await target.api.importRecords(exported)
            #expect(second == ImportSummary(unchanged: exported.count), "importing twice changes nothing")

            // A changed resource is put back, with a version past both.
            let changed = try await target.api.games.list(ListQuery(limit: 1)).items[0]
            let edited = try await target.api.games.patch(changed.id, MergePatch().set("name", "Renamed"))
            let third = try await target.api.importRecords(exported)
            #expect(third == ImportSummary(updated: 1, unchanged: exported.count - 1))
            let restored = try await target.api.games.get(changed.id).value
            #expect(restored.name == changed.name)
            #expect(restored.version == edited.value.version + 1)
            let entries = try await target.api.entries(of: playlist.id).list().items
            #expect(entries.map(\.playableItem.id) == [items[2], items[0], items[2]])
            #expect(try await target.api.comments.get(comment.value.id).value.deleted)
        }
    }

    @Test(arguments: TestEngine.all) func imagesTravelWithTheirRecordsWhenSentFirst(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let source = try TestCatalog(seed: false)
            let game = try await source.api.games.create(GameInput(name: "Pictured", imageName: "p")).value
            let png = Data(TestImages.png(width: 40, height: 30))
            let shown = try await source.api.games.setImage(of: game.id, png, format: .png)
            let image = try #require(shown.value.image)
            #expect(shown.value.version == 2)
            let playlist = try await source.api.playlists.create(PlaylistInput(title: "Covered")).value
            let covered = try await source.api.playlists.setImage(of: playlist.id, png, format: .png).value
            #expect(covered.image == image, "the same bytes, the same image")
            let records = try await Self.export(source.api)
            #expect(records.compactMap(\.image) == [image, image])

            // Without the image, the records that show it are refused, naming them.
            let target = try TestCatalog(seed: false)
            await expectProblem(422, "validationFailed") { try await target.api.importRecords(records) }
            let refused = try await target.client.send(
                "POST", "/admin/import", json: ["records": [try JSONSerialization.jsonObject(with: CatalogJSON.makeEncoder().encode(records[0]))]])
            #expect(refused.problem?.errors?.map(\.pointer) == ["/records/0/data/image"])
            // Its bytes, checked against their name, then the records.
            let original = try await source.api.imageData(image)
            await expectProblem(422, "hashMismatch") { try await target.api.importImage(original, hash: String(repeating: "0", count: 64)) }
            #expect(try await target.api.importImage(original, hash: image.hash) == image)
            #expect(try await target.api.importRecords(records) == ImportSummary(created: 2))
            #expect(try await target.api.games.get(game.id).value.image == image)
            #expect(try await target.api.imageData(image) == original)
            let thumbnail = try await target.api.imageData(image, points: 20, scale: 3, format: .webp)
            #expect(ImageFormat.sniff(thumbnail) == .webp)
        }
    }

    @Test(arguments: TestEngine.all) func invalidRecordsAreRefusedWholeNamingTheRecord(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let now = Date()
            let game = Game(id: CatalogID(), name: "Robotron", description: "", imageName: "robotron", createdAt: now, updatedAt: now, version: 1)
            let orphan = CatalogModels.Comment(id: CatalogID(), playableItemId: CatalogID(), author: "a", body: "b", createdAt: now, updatedAt: now, version: 1)
            var problem = await expectProblem(422) { try await catalog.api.importRecords([.game(game), .comment(orphan)]) }
            #expect(problem?.errors?.map(\.pointer) == ["/records/1/data/playableItemId"])
            #expect(try await catalog.api.games.list().items.isEmpty, "nothing of a refused batch is applied")

            var bad = game
            bad.name = ""
            bad.version = 0
            problem = await expectProblem(422) { try await catalog.api.importRecords([.game(bad)]) }
            #expect(problem?.errors?.map(\.pointer) == ["/records/0/data/name", "/records/0/data/version"])
            let unknown = try await catalog.client.send("POST", "/admin/import", json: ["records": [["type": "game", "data": ["id": CatalogID().rawValue, "rating": 5]]]])
            #expect(unknown.status == 422)
            #expect(unknown.problem?.errors?.contains { $0.pointer == "/records/0/data/rating" && $0.code == "unknownField" } == true)
            let kind = try await catalog.client.send("POST", "/admin/import", json: ["records": [["type": "movie", "data": [:]]]])
            #expect(kind.problem?.errors?.map(\.pointer) == ["/records/0/type"])
            let tooMany = try await catalog.client.send("POST", "/admin/import", json: ["records": Array(repeating: ["type": "game"], count: 1001)])
            #expect(tooMany.problem?.errors?.map(\.code) == ["tooLong"])
            let created = try await catalog.api.importRecords([.game(game)])
            #expect(created.created == 1)
            #expect(try await catalog.api.games.get(game.id).value.name == "Robotron")
        }
    }
}
