import CatalogModels
import Foundation
import GRDB
import TestSupport
import Testing

@testable import CatalogStore

/// The order keys of playlist entries: a write of one entry writes one row, rebalancing
/// stays rare and small, positions read back exact, and 0009 keeps every order.
@Suite struct EntryOrderTests {
    // MARK: The arithmetic

    @Test func aKeyFallsStrictlyBetweenItsNeighboursOrThereIsNoRoom() {
        #expect(EntryOrder.key(between: nil, and: nil) == EntryOrder.spacing)
        #expect(EntryOrder.key(between: 7, and: nil) == 7 + EntryOrder.spacing)
        #expect(EntryOrder.key(between: EntryOrder.maxKey - 1, and: nil) == nil)
        #expect(EntryOrder.key(between: nil, and: EntryOrder.spacing * 3) == EntryOrder.spacing * 2)
        #expect(EntryOrder.key(between: nil, and: 5) == 2)
        #expect(EntryOrder.key(between: nil, and: 1) == 0)
        #expect(EntryOrder.key(between: nil, and: 0) == nil)
        #expect(EntryOrder.key(between: 10, and: 20) == 15)
        #expect(EntryOrder.key(between: 10, and: 12) == 11)
        #expect(EntryOrder.key(between: 10, and: 11) == nil)
    }

    @Test func aSpreadMakesRoomInTheSmallestWindowThatHasIt() {
        // Dense keys around place 50 of 100 keys spaced apart: only the dense run moves.
        var keys = (0..<100).map { Int64($0 + 1) * EntryOrder.spacing }
        let dense = (0..<20).map { keys[49] + Int64($0 + 1) }
        keys.insert(contentsOf: dense, at: 50)
        let (changed, key) = EntryOrder.spread(keys, at: 60)
        var after = keys
        for change in changed { after[change.index] = change.key }
        after.insert(key, at: 60)
        #expect(zip(after, after.dropFirst()).allSatisfy { $0 < $1 }, "strictly increasing")
        #expect(!changed.isEmpty && changed.count <= 32, "a window of at most 32 entries moved: \(changed.count)")
        #expect(zip(after[44..<77], after[45..<78]).allSatisfy { $1 - $0 >= EntryOrder.minimumGap(17) } || changed.count == keys.count)
        // With no room anywhere, the whole list is spread over the key space.
        let crowded = (0..<300).map { Int64($0) }
        let (all, middle) = EntryOrder.spread(crowded, at: 150)
        var spread = crowded
        for change in all { spread[change.index] = change.key }
        spread.insert(middle, at: 150)
        #expect(zip(spread, spread.dropFirst()).allSatisfy { $1 - $0 >= EntryOrder.minimumGap(301) })
        #expect(spread.first ?? -1 >= 0 && spread.last ?? .max <= EntryOrder.maxKey)
    }

    @Test func aNewOrderKeepsTheKeysOfItsLongestRunInOrder() {
        let s = EntryOrder.spacing
        // The same order: nothing changes.
        #expect(EntryOrder.keys(for: [s, 2 * s, 3 * s]) == [s, 2 * s, 3 * s])
        // One entry moved to the front, one new at the end: only those two get keys.
        let keys = EntryOrder.keys(for: [3 * s, s, 2 * s, nil])
        #expect(keys[1] == s && keys[2] == 2 * s)
        #expect(keys[0] < s && keys[0] >= 0 && keys[3] > 2 * s)
        // No room between kept keys: everything anew, spaced apart.
        #expect(EntryOrder.keys(for: [10, nil, nil, 11]) == [s, 2 * s, 3 * s, 4 * s])
        #expect(EntryOrder.longestIncreasing([5, nil, 1, 2, 9, 3, nil, 4]) == [2, 3, 5, 7])
    }

    // MARK: In the store

    /// How many entry rows writes have rewritten: each write of an entry's key adds one to its version.
    private static func rewrites(_ scratch: Scratch) throws -> Int {
        try DatabaseQueue(path: scratch.database).read { try Int.fetchOne($0, sql: "SELECT coalesce(sum(version - 1), 0) FROM playlist_entries") ?? 0 }
    }

    private static func positions(_ store: CatalogStore, _ playlist: CatalogID) throws -> [PlaylistEntry] {
        var entries: [PlaylistEntry] = []
        var cursor: String?
        repeat {
            let page = try store.entries.page(of: playlist, limit: 100, cursor: cursor)
            entries += try CatalogJSON.makeDecoder().decode(Page<PlaylistEntry>.self, from: Data(page.json)).items
            cursor = page.nextCursor
        } while cursor != nil
        return entries
    }

    @Test func oneEntryWritesOneRowWhateverThePlaylistsLength() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let items = try (0..<50).map { index in
            try wait {
                store.items.create(
                    PlayableItemInput(title: "Item \(index)", description: "", streamURL: URL(string: "https://example.com/\(index).m3u8")!),
                    completion: $0)
            }.id
        }
        let playlist = try wait { store.playlists.create(PlaylistInput(title: "Long"), completion: $0) }.id
        _ = try wait {
            store.entries.replace(
                PlaylistOrder(playableItemIds: (0..<PlaylistOrder.maxEntries).map { items[$0 % items.count] }), of: playlist,
                preconditions: WritePreconditions(), completion: $0)
        }
        var model = try Self.positions(store, playlist).map(\.entryId)
        #expect(model.count == PlaylistOrder.maxEntries)
        #expect(try Self.rewrites(scratch) == 0)

        // Moves anywhere: one row each, and the order read back is the model's.
        var generator = SeededGenerator(seed: 0x0DE5)
        for _ in 0..<200 {
            let from = Int.random(in: 0..<model.count, using: &generator), to = Int.random(in: 0..<model.count, using: &generator)
            let moved = try wait { store.entries.move(model[from], of: playlist, to: to, preconditions: WritePreconditions(), completion: $0) }
            let entry = try CatalogJSON.makeDecoder().decode(PlaylistEntry.self, from: Data(moved.json))
            #expect(entry.position == to)
            model.insert(model.remove(at: from), at: to)
        }
        #expect(try Self.rewrites(scratch) <= 200)
        // Inserts at one place, the worst case for keys: rebalancing rewrites a few rows
        // per insert on average (a log of the length is the least any labelling can do),
        // never the whole playlist each time.
        let before = try Self.rewrites(scratch)
        for index in 0..<400 {
            _ = try wait { store.entries.remove(model.removeLast(), from: playlist, preconditions: WritePreconditions(), completion: $0) }
            let added = try wait {
                store.entries.insert(
                    PlaylistEntryInput(playableItemId: items[index % items.count], position: 1), into: playlist,
                    preconditions: WritePreconditions(), completion: $0)
            }
            model.insert(added.entryID, at: 1)
        }
        let rebalanced = try Self.rewrites(scratch) - before
        #expect(rebalanced > 0 && rebalanced <= 400 * 8, "\(rebalanced) rows rewritten to make room for 400 inserts at one place")
        let read = try Self.positions(store, playlist)
        #expect(read.map(\.entryId) == model)
        #expect(read.map(\.position) == Array(0..<model.count))
        // Up next follows the same order.
        if case let .entry(next) = try store.entries.next(after: model[0], of: playlist) { #expect(next.entryID == model[1]) } else { Issue.record("no next") }
        let last = try #require(model.last)
        if case .endOfPlaylist = try store.entries.next(after: last, of: playlist) {} else { Issue.record("the last entry has a next") }
    }

    @Test func migration0009KeepsEveryOrderAndLogsEveryEntry() throws {
        let scratch = try Scratch()
        let later = scratch.directory.appendingPathComponent("later")
        try FileManager.default.createDirectory(at: later, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: scratch.migrations.path) where name >= "0009" && name.hasSuffix(".sql") {
            try FileManager.default.moveItem(at: scratch.migrations.appendingPathComponent(name), to: later.appendingPathComponent(name))
        }
        // A catalog of 0008, with dense positions.
        let before = try scratch.open()
        try before.close()
        let queue = try DatabaseQueue(path: scratch.database)
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                    VALUES ('i1', 'A', '', 'https://e/a', 0, 0, 1), ('i2', 'B', '', 'https://e/b', 0, 0, 1)
                    """)
            try db.execute(
                sql: """
                    INSERT INTO playlists (id, title, description, entry_count, visibility, created_at, updated_at, version)
                    VALUES ('p1', 'P', '', 3, 'private', 0, 0, 1)
                    """)
            try db.execute(
                sql: """
                    INSERT INTO playlist_entries (id, playlist_pk, item_pk, position, created_at)
                    SELECT 'e' || n, (SELECT pk FROM playlists), (SELECT pk FROM playable_items WHERE id = CASE n WHEN 1 THEN 'i2' ELSE 'i1' END), 3 - n, n
                    FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3)
                    """)
        }
        let top = try queue.read { try Int64.fetchOne($0, sql: "SELECT max(seq) FROM changes") ?? 0 }
        try queue.close()
        for name in try FileManager.default.contentsOfDirectory(atPath: later.path) {
            try FileManager.default.moveItem(at: later.appendingPathComponent(name), to: scratch.migrations.appendingPathComponent(name))
        }
        let store = try scratch.open()
        defer { try? store.close() }
        #expect(store.appliedMigrations.contains("0009_entry_order_keys.sql"))
        let migrated = try DatabaseQueue(path: scratch.database)
        let keys = try migrated.read { try Row.fetchAll($0, sql: "SELECT id, sort_key FROM playlist_entries ORDER BY sort_key") }
        #expect(keys.map { $0["id"] as String } == ["e3", "e2", "e1"])
        #expect(keys.map { $0["sort_key"] as Int64 } == [1, 2, 3].map { $0 * EntryOrder.spacing })
        // Every entry is logged after what a token from before saw, hidden as its playlist is.
        let logged = try migrated.read { try Row.fetchAll($0, sql: "SELECT id, seq, subject, hidden, shown FROM changes WHERE type = 'playlistEntry' ORDER BY seq") }
        #expect(logged.map { $0["id"] as String } == ["e3", "e2", "e1"])
        #expect(logged.allSatisfy { ($0["seq"] as Int64) > top && $0["subject"] as String == "p1" && $0["hidden"] as Int == 1 && $0["shown"] as Int == 0 })
        try migrated.close()
    }
}
