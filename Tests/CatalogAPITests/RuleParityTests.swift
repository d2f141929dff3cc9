import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// One rule set: the same invalid document is refused with the same pointers and codes
/// as a request body and as the `data` of an import record (whose pointers carry their
/// `/records/N/data` prefix), because both are read by the resource's declaration.
@Suite struct RuleParityTests {
    static let long = String(repeating: "é", count: 5001)
    static let now = "2025-01-31T12:00:00.000Z"

    /// Invalid bodies of each resource, with the members an import record adds to them.
    static func cases(item: CatalogID) -> [(path: String, type: String, body: [String: Any], record: [String: Any])] {
        let stamps: [String: Any] = ["createdAt": now, "updatedAt": now, "version": 1]
        let items: [[String: Any]] = [
            ["title": "", "streamURL": "ftp://example.com/a", "thumbnailURL": 42, "durationSeconds": -1, "colour": "red"],
            ["description": long, "streamURL": "https://example.com/" + String(repeating: "a", count: 2048)],
            ["title": "a\u{0}b", "streamURL": "https://example.com/a", "durationSeconds": "ten"],
        ]
        let games: [[String: Any]] = [
            ["name": "", "imageName": ".hidden"],
            ["name": 5, "description": long, "imageName": "ok", "rating": 5],
        ]
        let locations: [[String: Any]] = [
            ["name": "Paris", "countryCode": "fr", "latitude": 91, "longitude": "east"],
            ["countryCode": "FRA", "latitude": -90.5, "longitude": 181],
        ]
        let playlists: [[String: Any]] = [["title": "", "description": long], ["description": 3]]
        let comments: [[String: Any]] = [["body": long], ["body": 7, "mood": "happy"]]
        let commentRecord: [String: Any] = ["playableItemId": item.rawValue, "author": "ann", "deleted": false, "replyCount": 0]
        return items.map { ("/v1/playable-items", "playableItem", $0, stamps) }
            + games.map { ("/v1/games", "game", $0, stamps) }
            + locations.map { ("/v1/locations", "location", $0, stamps) }
            + playlists.map { ("/v1/playlists", "playlist", $0, stamps.merging(["entries": []]) { $1 }) }
            + comments.map { ("/v1/playable-items/\(item)/comments", "comment", $0, stamps.merging(commentRecord) { $1 }) }
    }

    @Test(arguments: TestEngine.all) func bodiesAndImportRecordsAreRefusedAlike(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "Item", streamURL: URL(string: "https://example.com/v")!)).value.id
            for (path, type, body, extra) in Self.cases(item: item) {
                let api = try await catalog.client.send("POST", path, json: body)
                #expect(api.status == 422, "\(path) \(body)")
                let expected = (api.problem?.errors ?? []).map { "/records/0/data\($0.pointer) \($0.code)" }
                #expect(!expected.isEmpty)
                let data = body.merging(extra) { $1 }.merging(["id": CatalogID().rawValue]) { $1 }
                let imported = try await catalog.client.send("POST", "/admin/import", json: ["records": [["type": type, "data": data]]])
                #expect(imported.status == 422)
                #expect((imported.problem?.errors ?? []).map { "\($0.pointer) \($0.code)" } == expected, "\(type) \(body)")
            }
            #expect(try await catalog.api.games.list().items.isEmpty, "nothing refused was imported")
        }
    }
}
