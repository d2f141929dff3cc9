import CatalogModels
import Foundation
import TestSupport
import Testing

@testable import CatalogStore

/// Rows rendered straight to JSON must be byte for byte what the Codable models encode to.
@Suite struct RenderingParityTests {
    static let awkward = ["plain", "quote \" backslash \\ slash /", "controls \u{1}\u{8}\u{c}\n\r\t\u{1f}\u{7f}", "é 😀 \u{2028} 中文", ""]

    func expectParity<Model: Codable & Equatable>(_ json: [UInt8], as type: Model.Type, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let model = try CatalogJSON.makeDecoder().decode(Model.self, from: Data(json))
        let encoded = Array(try CatalogJSON.makeEncoder().encode(model))
        #expect(encoded == json, "\(String(decoding: json, as: UTF8.self))", sourceLocation: sourceLocation)
    }

    /// Stores `assignments` (column, text) in the row `id` as they are, past the rules that
    /// refuse control characters (so rendering meets every awkward string), and renders the
    /// row as a write does.
    func overwrite(_ store: ResourceStore, _ id: CatalogID, _ assignments: [(String, String?)]) throws -> RenderedResource {
        let sql = "UPDATE \(store.schema.table) SET \(assignments.map { "\($0.0) = ?" }.joined(separator: ", ")) WHERE id = ?" + store.returning
        return try store.database.write { db in
            try store.renderWritten(db, sql, assignments.map(\.1) + [id.rawValue])
        }
    }

    @Test func everyResourceRendersAsItsModelEncodes() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        for (index, text) in Self.awkward.enumerated() {
            let created = try wait {
                store.items.create(
                    PlayableItemInput(
                        title: "t", streamURL: URL(string: "https://example.com/\(index)/a.m3u8?x=1&y=%20")!,
                        thumbnailURL: index % 2 == 0 ? URL(string: "https://example.com/p.jpg") : nil,
                        durationSeconds: [nil, 0, 596, 146.5, 1e-7][index]), completion: $0)
            }
            try expectParity(created.json, as: PlayableItem.self)
            let item = try overwrite(store.items, created.id, [("title", "t" + text), ("description", text)])
            try expectParity(item.json, as: PlayableItem.self)
            try expectParity(try #require(try store.items.rendered(item.id)).json, as: PlayableItem.self)
            let newGame = try wait { store.games.create(GameInput(name: "g", imageName: "g-\(index)"), completion: $0) }
            let game = try overwrite(store.games, newGame.id, [("name", "g" + text), ("description", text)])
            try expectParity(game.json, as: Game.self)
            let newLocation = try wait {
                store.locations.create(
                    LocationInput(
                        name: "l", countryCode: "FR", latitude: [0, -90, 90, 46.227638, -0.023559][index],
                        longitude: [0, -180, 180, 2.213749, 1e-7][index]), completion: $0)
            }
            let location = try overwrite(store.locations, newLocation.id, [("name", "l" + text)])
            try expectParity(location.json, as: Location.self)
        }
        for order in [ListRequest.Order.field("createdAt", descending: false), .field("title", descending: true)] {
            let page = try store.items.renderedList(ListRequest(limit: 3, order: order))
            try expectParity(page.json, as: Page<PlayableItem>.self)
        }
        let near = try store.locations.renderedList(ListRequest(order: .distance, areas: [.near(latitude: 10, longitude: 10, radiusMeters: 20_000_000)]))
        try expectParity(near.json, as: Page<Location>.self)
        let decoded = try CatalogJSON.makeDecoder().decode(Page<Location>.self, from: Data(near.json))
        #expect(decoded.items.allSatisfy { $0.distanceMeters != nil })
    }

    @Test func playlistsEntriesAndCommentsRenderAsTheirModelsEncode() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        var itemIDs: [CatalogID] = []
        let author = try store.accounts.bootstrap(
            name: "a", role: .member, keyName: "k", digest: [UInt8](repeating: 7, count: 32),
            prefix: "catalog_test"
        ).user
        for (index, text) in Self.awkward.enumerated() {
            let item = try wait {
                store.items.create(
                    PlayableItemInput(
                        title: "t", streamURL: URL(string: "https://example.com/\(index)")!,
                        durationSeconds: [nil, 0, 596, 146.5, 1e-7][index]), completion: $0)
            }
            _ = try overwrite(store.items, item.id, [("title", "t" + text), ("description", text)])
            itemIDs.append(item.id)
            let newPlaylist = try wait { store.playlists.create(PlaylistInput(title: "p"), completion: $0) }
            let playlist = try overwrite(store.playlists, newPlaylist.id, [("title", "p" + text), ("description", text)])
            try expectParity(playlist.json, as: Playlist.self)
            let entry = try wait { store.entries.insert(PlaylistEntryInput(playableItemId: item.id), into: playlist.id, preconditions: .init(), completion: $0) }
            try expectParity(entry.json, as: PlaylistEntry.self)
            let newComment = try wait { store.comments.post(on: item.id, by: author, CommentInput(body: "b"), completion: $0) }
            let comment = try overwrite(store.comments.resources, newComment.id, [("author", "a" + text), ("body", "b" + text)])
            try expectParity(comment.json, as: CatalogModels.Comment.self)
            let newReply = try wait { store.comments.post(on: item.id, by: author, CommentInput(body: "r", parentId: comment.id), completion: $0) }
            let reply = try overwrite(store.comments.resources, newReply.id, [("body", text + "r")])
            try expectParity(reply.json, as: CatalogModels.Comment.self)
            _ = try wait { store.comments.delete(comment.id, preconditions: .init(), completion: $0) }
            try expectParity(try #require(try store.comments.resources.rendered(comment.id)).json, as: CatalogModels.Comment.self)
            let shaped = try #require(try store.playlists.rendered(playlist.id, embedding: [store.playlistEntries]))
            try expectParity(shaped.json, as: Playlist.self)
            let withThreads = try #require(try store.items.rendered(item.id, embedding: [store.itemComments, store.itemPlaylists]))
            try expectParity(withThreads.json, as: PlayableItem.self)
        }
        let playlist = try wait { store.playlists.create(PlaylistInput(title: "all"), completion: $0) }
        _ = try wait { store.entries.replace(PlaylistOrder(playableItemIds: itemIDs + itemIDs), of: playlist.id, preconditions: .init(), completion: $0) }
        try expectParity(try store.entries.page(of: playlist.id, limit: 4, cursor: nil).json, as: Page<PlaylistEntry>.self)
        try expectParity(try store.comments.resources.renderedList(ListRequest(scope: .commentsOn(item: itemIDs[0]))).json, as: Page<CatalogModels.Comment>.self)
    }

    /// A creation renders its row from the values it bound (``BoundRow``), not from a
    /// read: byte for byte what reading the row back renders.
    @Test func aCreatedRowRendersAsItReadsBack() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        #expect(store.items.boundInsert != nil && store.games.boundInsert != nil && store.locations.boundInsert != nil)
        func expectReadBack(
            _ store: ResourceStore, _ created: RenderedResource,
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws {
            store.cache?.invalidate(id: created.id.rawValue)
            let read = try #require(try store.rendered(created.id), sourceLocation: sourceLocation)
            #expect(String(decoding: created.json, as: UTF8.self) == String(decoding: read.json, as: UTF8.self), sourceLocation: sourceLocation)
            #expect(created.version == read.version && created.version == 1, sourceLocation: sourceLocation)
        }
        let texts = ["plain", "quote \" backslash \\ slash /", "é 😀 中文", "x"]
        for (index, text) in texts.enumerated() {
            try expectReadBack(
                store.items,
                wait {
                    store.items.create(
                        PlayableItemInput(
                            title: text, description: index == 3 ? "" : text, streamURL: URL(string: "https://example.com/\(index)/a.m3u8?x=1&y=%20")!,
                            thumbnailURL: index % 2 == 0 ? URL(string: "https://example.com/p.jpg") : nil,
                            durationSeconds: [nil, 596, 146.5, 1e-7][index]), completion: $0)
                })
            try expectReadBack(store.games, wait { store.games.create(GameInput(name: text, description: text, imageName: "g-\(index)"), completion: $0) })
            try expectReadBack(
                store.locations,
                wait {
                    store.locations.create(
                        LocationInput(
                            name: text, countryCode: "FR", latitude: [0, -90, 90, 46.227638][index],
                            longitude: [-180, 180, 2.213749, 1e-7][index]), completion: $0)
                })
        }
    }

    /// Strings of every awkward kind, at every length around the 8-byte scan, and numbers.
    @Test func stringsAndNumbersRenderAsTheEncoderWritesThem() throws {
        let alphabet: [String] = ["a", "Z", "0", " ", "/", "\"", "\\", "\u{0}", "\u{1}", "\n", "\t", "\u{1f}", "\u{7f}", "é", "😀", "\u{2028}", "中", "~"]
        var generator = SeededGenerator(seed: 42)
        let encoder = CatalogJSON.makeEncoder()
        for length in 0..<600 {
            let text = (0..<(length % 40)).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }.joined()
            var writer = JSONWriter()
            var copy = text
            copy.withUTF8 { writer.string(utf8: $0) }
            #expect(writer.bytes == Array(try encoder.encode(text)), "\(text.debugDescription)")
        }
        let numbers: [Double] = [0, -0.0, 1, -1, 596, 146.5, 1e-7, 1e15 - 1, 1e15, -1e15 + 1, 1e16, 123456789.125, .pi, -2.5e-300, 9_007_199_254_740_992]
        for number in numbers + (0..<500).map({ _ in Double(bitPattern: generator.next()) }).filter(\.isFinite) {
            var writer = JSONWriter()
            writer.number(number)
            #expect(writer.bytes == Array(try encoder.encode(number)), "\(number)")
        }
        for integer in [Int64.min, .max, 0, -1, 10, 99, 100] + (0..<200).map({ _ in Int64(bitPattern: generator.next()) >> (generator.next() % 63) }) {
            var writer = JSONWriter()
            writer.integer(integer)
            #expect(writer.bytes == Array(String(integer).utf8))
        }
    }
}

/// The render cache is bounded in bytes as well as entries.
@Suite struct RenderCacheBoundTests {
    @Test func theCacheHoldsAtMostItsBytes() {
        let cache = RenderCache(capacity: 1000, maxBytes: 6400, shards: 1)
        func id(_ index: Int) -> [UInt8] { Array(String(format: "%036d", index).utf8) }
        func store(_ index: Int, bytes: Int) {
            let json = [UInt8](repeating: UInt8(ascii: "x"), count: bytes)
            _ = id(index).withUnsafeBufferPointer { id in
                json.withUnsafeBufferPointer { cache.store(id: id, version: 1, revision: 0, json: $0, epoch: RenderCache.currentEpoch) }
            }
        }
        func held(_ index: Int, revision: Int64 = 0) -> Bool {
            var writer = JSONWriter()
            return id(index).withUnsafeBufferPointer { cache.write(id: $0, version: 1, revision: revision, into: &writer) }
        }
        // An entry over 1/64 of the budget (100 bytes) is not kept.
        store(0, bytes: 101)
        #expect(!held(0))
        // 64 entries of 100 bytes fill it; the 65th starts it over, so the first are gone.
        for index in 1...64 { store(index, bytes: 100) }
        #expect(held(1) && held(64))
        var writer = JSONWriter()
        _ = id(64).withUnsafeBufferPointer { cache.write(id: $0, version: 1, revision: 0, into: &writer) }
        #expect(writer.bytes == Array(repeating: UInt8(ascii: "x"), count: 100), "what was stored, without the id kept beside it")
        store(65, bytes: 100)
        #expect(held(65))
        #expect(!held(65, revision: 7), "the same id and version written anew (by another server) is not served")
        #expect(!held(1))
    }
}
