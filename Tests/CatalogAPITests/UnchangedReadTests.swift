import CatalogClient
import CatalogModels
import Foundation
import GRDB
import ServiceTestSupport
import Testing

/// On SQLite a `GET` of an item that nothing has changed since a read found it is answered
/// from memory, with no query (the wal-index header tells every commit). These tests hold
/// what every such answer says against the same items read straight from the database
/// file, after each kind of write: through the API, an import that brings a deleted id
/// back, counts added up, an account's deletion, another program writing the file, and
/// against the change feed.
@Suite struct UnchangedReadTests {
    /// Each item asked for twice (the second answer comes from memory when nothing changed),
    /// anonymously and as the admin, compared with its row in the file: 404 when it has none.
    static func expectReadsMatchTheFile(_ catalog: TestCatalog, _ ids: [CatalogID], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let file = try DatabaseQueue(path: catalog.directory.appendingPathComponent("catalog.sqlite").path, configuration: Self.anotherProgram)
        let rows = try file.read { db in
            try Row.fetchAll(db, sql: "SELECT id, version, title, description, like_count, view_count FROM playable_items")
        }
        try file.close()
        let byID = Dictionary(uniqueKeysWithValues: rows.map { (($0["id"] as String), $0) })
        for id in ids {
            for client in [catalog.anonymous, catalog.client, catalog.anonymous] {
                let response = try await client.get("/v1/playable-items/\(id)")
                guard let row = byID[id.rawValue] else {
                    #expect(response.status == 404, "\(id) is gone", sourceLocation: sourceLocation)
                    continue
                }
                #expect(response.status == 200, sourceLocation: sourceLocation)
                let item = try response.decode(PlayableItem.self)
                #expect(item.version == row["version"], sourceLocation: sourceLocation)
                #expect(item.title == row["title"] && item.description == row["description"], sourceLocation: sourceLocation)
                #expect(item.likeCount == row["like_count"] && item.viewCount == row["view_count"], sourceLocation: sourceLocation)
            }
        }
    }

    static var anotherProgram: Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return configuration
    }

    @Test func unchangedReadsStayExactThroughEveryKindOfWrite() async throws {
        let catalog = try TestCatalog(seed: false)
        defer { try? catalog.stop() }
        let ids = try await ViewerProgressTests.items(catalog, 6)
        try await Self.expectReadsMatchTheFile(catalog, ids)

        // Through the API: a patch, a replacement, a deletion.
        _ = try await catalog.api.playableItems.patch(ids[0], MergePatch().set("title", "Patched"))
        _ = try await catalog.api.playableItems.replace(ids[1], with: PlayableItemInput(title: "Replaced", streamURL: URL(string: "https://example.com/r.m3u8")!))
        try await catalog.api.playableItems.delete(ids[2])
        try await Self.expectReadsMatchTheFile(catalog, ids)

        // An import bringing the deleted id back at version 1, and one changing another item.
        let records: [[String: Any]] = [ids[2], ids[3]].map { id in
            [
                "type": "playableItem",
                "data": [
                    "id": id.rawValue, "title": "Imported \(id.rawValue.prefix(4))", "streamURL": "https://example.com/i.m3u8",
                    "createdAt": "2026-11-01T10:00:00.000Z", "updatedAt": "2026-11-01T10:00:00.000Z", "version": 1,
                ] as [String: Any],
            ]
        }
        #expect(try await catalog.client.send("POST", "/admin/import", json: ["records": records]).status == 200)
        try await Self.expectReadsMatchTheFile(catalog, ids)

        // Likes added up (no new version), then the liking account deleted.
        let (fan, fanID) = try ViewerProgressTests.viewer(catalog, "Fan")
        try await fan.viewer.rate(ids[4], .like)
        try catalog.application.applyCounts()
        try await Self.expectReadsMatchTheFile(catalog, ids)
        #expect(try await catalog.client.send("DELETE", "/v1/users/\(fanID)").status == 204)
        try catalog.application.applyCounts()
        try await Self.expectReadsMatchTheFile(catalog, ids)

        // Another program writing the file, behind the server's back.
        let outside = try DatabaseQueue(path: catalog.directory.appendingPathComponent("catalog.sqlite").path, configuration: Self.anotherProgram)
        try await outside.write { db in
            try db.execute(sql: "UPDATE playable_items SET title = 'From outside', version = version + 1 WHERE id = ?", arguments: [ids[5].rawValue])
        }
        try outside.close()
        try await Self.expectReadsMatchTheFile(catalog, ids)

        // The change feed's latest document of each item is what a GET shows.
        let changes = try await catalog.api.changes.page(since: nil).changes
        for id in ids where ids[5] != id {
            guard let last = changes.last(where: { $0.id == id }) else { continue }
            let shown = try await catalog.anonymous.get("/v1/playable-items/\(id)")
            if last.deleted {
                #expect(shown.status == 404)
            } else {
                #expect(try shown.decode(PlayableItem.self).version == last.version)
            }
        }
    }
}
