import CatalogModels
import Foundation
import GRDB
import Synchronization
import TestSupport
import Testing

@testable import CatalogStore

/// Searches find the same rows whichever way they are run: through the full-text index
/// (a search matching few rows), by testing each row a walk along the list's order reads
/// (`catalog_match`, for a search matching most rows), or through the index after a walk
/// that gave up; relevance ranks at most the newest 500 matches.
@Suite struct SearchTests {
    /// Titles and descriptions from a small vocabulary with accents, case and digits,
    /// so that some words are in most rows, some in few, and some are prefixes of others.
    /// "می‌خواهم" holds a zero-width non-joiner, which Swift keeps inside a letter and the
    /// tokenizer splits at: as a search, a phrase of "می" then "خواهم".
    static let vocabulary = [
        "Sample", "sámple", "SAMPLES", "video", "Vidéo", "cafe", "Café", "naïve", "zurich", "Zürich",
        "x", "x1", "42", "4200", "trail", "trailer", "b", "می", "خواهم", "می\u{200C}خواهم",
    ]

    @Test func everyStrategyFindsExactlyTheRowsTheIndexMatches() async throws {
        try await onThread { try self.everyStrategyFindsExactlyTheRowsTheIndexMatchesOnAThread() }
    }

    private func everyStrategyFindsExactlyTheRowsTheIndexMatchesOnAThread() throws {
        // Walks of 4,000 rows and pages of 1,000: an ample allowance (not the event loops'
        // 100 ms), as tests run in parallel on a loaded machine.
        ReadBudget.allow(.seconds(10))
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        var random = SeededGenerator(seed: 16)
        // More rows than a walk reads (ResourceStore.walkLimit), so that walks also give up.
        let count = 4_500
        let group = DispatchGroup()
        for index in 0..<count {
            // "sample" in most titles (a walk), "trail" in few (the index); "trending" only
            // in the newest rows (a walk for relevance that gives up); "zygote" at
            // the start of one title in 40, which sort last (a walk by title that gives up).
            let words = (0..<(1 + random.next() % 4)).map { _ in Self.vocabulary[Int(random.next() % UInt64(Self.vocabulary.count))] }
            let title =
                (index % 40 == 0 ? ["Zygote"] : []) + (index % 10 < 8 ? ["Sample"] : []) + words + (index >= count - 150 ? ["trending"] : [])
                + ["\(index)"]
            let description = (0..<(random.next() % 6)).map { _ in Self.vocabulary[Int(random.next() % UInt64(Self.vocabulary.count))] }
            group.enter()
            store.items.create(
                PlayableItemInput(
                    title: title.joined(separator: " "), description: description.joined(separator: " "),
                    streamURL: URL(string: "https://example.com/\(index).m3u8")!)
            ) { _ in group.leave() }
        }
        group.wait()
        let reader = try DatabaseQueue(path: scratch.database)
        let texts = [
            "sample", "samp", "sámple", "SAMPLES", "video sample", "vid", "cafe", "café", "naive", "zur", "x", "x1", "42", "trail",
            "trailer", "b", "sample 7", "nothing", "cafe zurich sample", "trending", "zygote", "zyg sample",
            "می\u{200C}خواهم", "می\u{200C}خوا sample",
        ]
        func requests(_ text: String) -> [ListRequest] {
            [
                ListRequest(limit: 97, order: .field("title", descending: false), search: text),
                ListRequest(limit: 97, order: .field("title", descending: true), search: text),
                ListRequest(limit: 97, order: .relevance, search: text),
            ]
        }
        // Rows whose index writes still wait (renamed, deleted and new ones, from another
        // program, which the store indexes after its next batch): every way finds them as
        // it will once they are indexed. (The store's own writes first, or its idle time
        // would apply these too.)
        try settled(reader)
        try reader.write { db in
            try db.execute(sql: "UPDATE playable_items SET title = 'Trail renamed ' || pk WHERE pk % 97 = 0")
            try db.execute(sql: "DELETE FROM playable_items WHERE pk % 89 = 0")
            try db.execute(
                sql: """
                    INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-a'
                                 || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
                           'Sample café trending fresh ' || pk, 'zurich', stream_url, created_at, updated_at, 1
                    FROM playable_items WHERE pk % 83 = 0
                    """)
        }
        #expect(try queued(reader) > 100)
        let pending = try texts.map { text in try requests(text).map { try pages(store, $0) } }
        _ = try wait { store.games.create(GameInput(name: "Any", imageName: "a"), completion: $0) }
        try settled(reader)
        for (text, found) in zip(texts, pending) {
            #expect(try requests(text).map { try pages(store, $0) } == found, "\(text): found alike before and after indexing")
        }
        for text in texts {
            let query = try #require(SearchQuery.fts5(text))
            // Every match, newest first, from the full-text index itself.
            let matches = try reader.read { db in
                try String.fetchAll(
                    db,
                    sql: """
                        SELECT id FROM playable_items WHERE pk IN (SELECT rowid FROM playable_items_fts WHERE playable_items_fts MATCH ?)
                        ORDER BY pk DESC
                        """, arguments: [query])
            }
            let byTitle = try reader.read { db in
                try String.fetchAll(
                    db,
                    sql: """
                        SELECT id FROM playable_items WHERE pk IN (SELECT rowid FROM playable_items_fts WHERE playable_items_fts MATCH ?)
                        ORDER BY title COLLATE NOCASE, id
                        """, arguments: [query])
            }
            #expect(try pages(store, ListRequest(limit: 97, order: .field("title", descending: false), search: text)) == byTitle, "\(text) by title")
            #expect(try pages(store, ListRequest(limit: 97, order: .field("title", descending: true), search: text)) == byTitle.reversed(), "\(text) by title, descending")
            let ranked = try pages(store, ListRequest(limit: 97, order: .relevance, search: text))
            #expect(ranked.count == min(matches.count, 500), "\(text) by relevance")
            #expect(try pages(store, ListRequest(limit: 1_000, order: .relevance, search: text)) == ranked, "\(text): pages follow the ranking")
            #expect(Set(ranked).symmetricDifference(matches.prefix(500)).isEmpty, "\(text): relevance ranks the newest 500 matches")
        }
        // Dense enough to walk: most titles hold "sample".
        #expect(try reader.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM playable_items WHERE title LIKE 'sample %'") ?? 0 } > 3_000)
    }

    /// The words of the newest 256 rows count a search's matches among them exactly as the
    /// full-text index does, where their text and the search are ASCII; otherwise (a word
    /// with an accent, among the rows or in the search, or rows of too many different
    /// words) they give no count, and the index is asked.
    @Test func theSampledRowsWordsCountWhatTheIndexCounts() async throws {
        try await onThread { try self.theSampledRowsWordsCountWhatTheIndexCountsOnAThread() }
    }

    private func theSampledRowsWordsCountWhatTheIndexCountsOnAThread() throws {
        // Its reads are not what is tested: beside the whole suite, a starved thread could
        // pass an event loop's one second of wall clock (this thread is the test's own).
        ReadBudget.allow(.seconds(10))
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        var random = SeededGenerator(seed: 38)
        let vocabulary = ["Sample", "SAMPLES", "video", "cafe", "x", "x1", "42", "4200", "trail", "trailer", "b", "zurich", "a1B2", "Star-Wars"]
        func create(_ title: String, _ description: String) {
            _ = try? wait {
                store.items.create(
                    PlayableItemInput(title: title, description: description, streamURL: URL(string: "https://example.com/v.m3u8")!), completion: $0)
            }
        }
        let group = DispatchGroup()
        for index in 0..<600 {
            let words = (0..<(1 + random.next() % 4)).map { _ in vocabulary[Int(random.next() % UInt64(vocabulary.count))] }
            let description = (0..<(random.next() % 6)).map { _ in vocabulary[Int(random.next() % UInt64(vocabulary.count))] }
            group.enter()
            store.items.create(
                PlayableItemInput(
                    title: (words + ["\(index)"]).joined(separator: " "), description: description.joined(separator: ", "),
                    streamURL: URL(string: "https://example.com/\(index).m3u8")!)
            ) { _ in group.leave() }
        }
        group.wait()
        let reader = try DatabaseQueue(path: scratch.database)
        try settled(reader)
        func words() throws -> SampleWords.Words? {
            try store.items.database.read { db in try SampleWords(table: "playable_items", columns: ["title", "description"], rows: 256).words(db, version: 0) }
        }
        let texts = [
            "sample", "samp", "SAMP", "s", "x", "x1", "42", "4", "trail", "b", "video sample", "star wars", "zz", "nothing", "1", "12", "59",
            "a1b2", "A1", "cafe zurich sample",
        ]
        let sampled = try #require(try words())
        for text in texts {
            let indexed = try reader.read { db in
                let floor = try Int64.fetchOne(db, sql: "SELECT pk FROM playable_items ORDER BY pk DESC LIMIT 1 OFFSET 255") ?? 0
                return try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM playable_items_fts WHERE playable_items_fts MATCH ? AND rowid >= ?",
                    arguments: [SearchQuery.fts5(text), floor]) ?? -1
            }
            #expect(sampled.matches(SearchQuery.searched(text)) == indexed, "\(text)")
        }
        #expect(sampled.matches(SearchQuery.searched("sample")) ?? 0 > 64, "a word in most rows")
        #expect(sampled.matches(SearchQuery.searched("café")) == nil, "a search with an accent")
        // A title with an accent among the newest rows.
        create("Café 600", "")
        #expect(try words() == nil)
        // Rows of too many different words.
        for index in 0..<256 {
            create("Many \(index)", (0..<70).map { "w\(index)x\($0)" }.joined(separator: " "))
        }
        #expect(try words() == nil)
    }

    @Test func aTitleMatchOutranksADescriptionMatchAndAShortTitleALongOne() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        func create(_ title: String, _ description: String) throws -> CatalogID {
            try wait { store.items.create(PlayableItemInput(title: title, description: description, streamURL: URL(string: "https://example.com/v.m3u8")!), completion: $0) }.id
        }
        let inDescription = try create("Evening news", "A trailer of the evening")
        let longTitle = try create("Trailer for a film with a rather long title indeed", "")
        let shortTitle = try create("Trailer", "")
        let twice = try create("Trailer trailer", "trailer")
        let ranked = try store.items.list(ListRequest(order: .relevance, search: "trailer"), as: PlayableItem.self).items.map(\.id)
        #expect(ranked == [twice, shortTitle, longTitle, inDescription])
    }

    /// A sorted search that matches few of the newest rows keeps its matches in order
    /// (`SearchLists`); its pages must still be what the index gives after every write,
    /// after a cursor whose row moved, and past the most matches a kept list holds.
    @Test func aKeptSortedSearchFollowsWritesCursorsAndItsLimit() async throws {
        try await onThread { try self.keptSortedSearchFollowsWritesCursorsAndItsLimit() }
    }

    private func keptSortedSearchFollowsWritesCursorsAndItsLimit() throws {
        // Pages past the kept list sort 17,000 matches each: an ample allowance (not the
        // event loops' 100 ms), as tests run in parallel on a loaded machine.
        ReadBudget.allow(.seconds(10))
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        // "Common" in the titles of 17,000 of 20,000 items, none of the newest: the sample
        // finds no match, so the index is used, and more match than a list keeps.
        let outside = try DatabaseQueue(path: scratch.database, configuration: Self.anotherProgram)
        try outside.write { db in
            try db.execute(
                sql: """
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
                    INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-a'
                                 || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
                           CASE WHEN i <= 17000 THEN 'Common clip ' ELSE 'Clip ' END || i, '', 'https://example.com/' || i, i, i, 1
                    FROM n
                    """)
        }
        // Another program's writes are indexed after the store's next batch.
        func indexOutsideWrites() throws {
            _ = try wait { store.games.create(GameInput(name: "Any", imageName: "a"), completion: $0) }
            try settled(outside)
        }
        try indexOutsideWrites()
        #expect(17_000 > SearchLists.listLimit)
        let query = try #require(SearchQuery.fts5("common"))
        func expected(after cursor: (title: String, id: String)? = nil, limit: Int = -1, descending: Bool = false) throws -> [String] {
            let direction = descending ? "DESC" : "ASC"
            let keyset = cursor == nil ? "" : " AND (title, id) \(descending ? "<" : ">") (?, ?)"
            return try outside.read { db in
                try String.fetchAll(
                    db,
                    sql: """
                        SELECT id FROM playable_items WHERE pk IN (SELECT rowid FROM playable_items_fts WHERE playable_items_fts MATCH ?)\(keyset)
                        ORDER BY title \(direction), id \(direction) LIMIT ?
                        """, arguments: StatementArguments([query] + (cursor.map { [$0.title, $0.id] } ?? []) + [limit]))
            }
        }
        let byTitle = ListRequest(limit: 1_000, order: .field("title", descending: false), search: "common")
        // Every page, twice (the second time from the kept list), past the list's 16,384.
        #expect(try pages(store, byTitle) == expected())
        #expect(try pages(store, byTitle) == expected())
        var descending = byTitle
        descending.order = .field("title", descending: true)
        #expect(try pages(store, descending) == expected(descending: true))

        var firstPage = byTitle
        firstPage.limit = 50
        let page = try store.items.list(firstPage, as: PlayableItem.self)
        #expect(try page.items.map(\.id.rawValue) == expected(limit: 50))
        let last = try #require(page.items.last)
        var next = firstPage
        next.cursor = page.nextCursor
        #expect(try store.items.list(next, as: PlayableItem.self).items.map(\.id.rawValue) == expected(after: (last.title, last.id.rawValue), limit: 50))

        // Writes through the store: a new first match, and a new match first after the
        // cursor; and from outside, one match on the next page that matches no more.
        func create(_ title: String) throws -> CatalogID {
            try wait {
                store.items.create(
                    PlayableItemInput(title: title, description: "", streamURL: URL(string: "https://example.com/new.m3u8")!),
                    completion: $0)
            }.id
        }
        let relevance = ListRequest(limit: 100, order: .relevance, search: "common")
        #expect(try pages(store, relevance).count == 500)
        let first = try create("Common aardvark"), second = try create(last.title + " again")
        let ranked = try pages(store, relevance)
        #expect(ranked.count == 500 && ranked.contains(first.rawValue) && ranked.contains(second.rawValue))
        let gone = try #require(try store.items.list(next, as: PlayableItem.self).items.dropFirst(10).first)
        try outside.write { db in
            try db.execute(sql: "UPDATE playable_items SET title = 'Rare clip', version = version + 1 WHERE id = ?", arguments: [gone.id.rawValue])
        }
        // Alike before the index has these writes (and the store's two creates) and after.
        let pending = (
            first: try store.items.list(firstPage, as: PlayableItem.self).items.first?.id, after: try store.items.list(next, as: PlayableItem.self).items.map(\.id.rawValue)
        )
        try indexOutsideWrites()
        #expect(try store.items.list(firstPage, as: PlayableItem.self).items.first?.id == first && pending.first == first)
        let after = try store.items.list(next, as: PlayableItem.self).items.map(\.id.rawValue)
        #expect(try after == expected(after: (last.title, last.id.rawValue), limit: 50) && pending.after == after)
        #expect(after.first == second.rawValue && !after.contains(gone.id.rawValue))

        // The cursor's own row moves (renamed to sort last): its page is what follows where it stood.
        try outside.write { db in
            try db.execute(sql: "UPDATE playable_items SET title = 'Common zzz', version = version + 1 WHERE id = ?", arguments: [last.id.rawValue])
        }
        try indexOutsideWrites()
        #expect(try store.items.list(next, as: PlayableItem.self).items.map(\.id.rawValue) == expected(after: (last.title, last.id.rawValue), limit: 50))
    }

    /// A search within a parent (the playlists holding an item) keeps no list: it walks,
    /// or uses the index, on every page, and its pages by relevance follow one another.
    @Test func aSearchWithinAParentPagesByRelevance() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let item = try wait {
            store.items.create(
                PlayableItemInput(title: "Clip", description: "", streamURL: URL(string: "https://example.com/c.m3u8")!),
                completion: $0)
        }
        var holding: Set<String> = []
        for index in 0..<100 {
            let title = index % 3 == 0 ? "Evening mix \(index)" : "Morning mix mix \(index)"
            let playlist = try wait { store.playlists.create(PlaylistInput(title: title), completion: $0) }
            if index % 4 != 0 {
                _ = try wait { store.entries.insert(PlaylistEntryInput(playableItemId: item.id), into: playlist.id, preconditions: .init(), completion: $0) }
                holding.insert(playlist.id.rawValue)
            }
        }
        func pages(_ limit: Int) throws -> [String] {
            try self.pages(
                ListRequest(limit: limit, order: .relevance, search: "mix", scope: .playlistsContaining(item: item.id)),
                store.playlists, as: Playlist.self, id: \.id)
        }
        let whole = try pages(100)
        #expect(Set(whole) == holding && whole.count == holding.count)
        #expect(try pages(7) == whole)
    }

    /// The index follows every write of a batch, applied in order: a create, a rename of
    /// it and a delete in one batch leave exactly the new terms; a failed write leaves
    /// none. Writes wait in the queue until the writer is idle (or enough of them wait);
    /// another program's, until after the server's next batch, or its next start.
    /// Searches through the store find the queued rows meanwhile.
    @Test func theIndexFollowsEachBatchAndOtherProgramsWrites() async throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        let database = try #require(Mirror(reflecting: store).descendant("database") as? SQLiteDatabase)
        let kept = try wait {
            store.items.create(
                PlayableItemInput(title: "Kept walrus", description: "", streamURL: URL(string: "https://example.com/k.m3u8")!),
                completion: $0)
        }
        let gone = try wait {
            store.items.create(
                PlayableItemInput(title: "Gone pelican", description: "", streamURL: URL(string: "https://example.com/g.m3u8")!),
                completion: $0)
        }
        struct Refused: Error {}
        let outcomes = Mutex<[String: Bool]>([:])
        try await onThread { () throws -> Void in
            let group = DispatchGroup()
            func submit(_ name: String, atomic: Bool = false, _ work: @escaping (Database) throws -> Void) {
                group.enter()
                database.writes.submit(atomic: atomic, work) { result in
                    outcomes.withLock { $0[name] = (try? result.get()) != nil }
                    group.leave()
                }
            }
            // A slow job holds the writer while the others queue up: they run as one batch.
            submit("hold") { _ in usleep(200_000) }
            usleep(50_000)
            submit("create") { db in
                try db.execute(
                    sql: """
                        INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                        VALUES (?, 'Fresh otter', 'river', 'https://example.com/o.m3u8', 1, 1, 1)
                        """, arguments: [CatalogID().rawValue])
            }
            submit("rename") { db in try db.execute(sql: "UPDATE playable_items SET title = 'Renamed heron' WHERE title = 'Fresh otter'") }
            submit("delete") { db in try db.execute(sql: "DELETE FROM playable_items WHERE id = ?", arguments: [gone.id.rawValue]) }
            submit("failed", atomic: true) { db in
                try db.execute(sql: "UPDATE playable_items SET title = 'Phantom lynx' WHERE id = ?", arguments: [kept.id.rawValue])
                throw Refused()
            }
            group.wait()
        }
        #expect(outcomes.withLock { $0 } == ["hold": true, "create": true, "rename": true, "delete": true, "failed": false])
        let outside = try DatabaseQueue(path: scratch.database, configuration: Self.anotherProgram)
        func found(_ word: String) throws -> [String] {
            try outside.read { db in
                try String.fetchAll(
                    db,
                    sql: """
                        SELECT title FROM playable_items WHERE pk IN (SELECT rowid FROM playable_items_fts WHERE playable_items_fts MATCH ?) ORDER BY title
                        """, arguments: [word])
            }
        }
        func queued() throws -> Int { try self.queued(outside) }
        #expect(try pages(store, ListRequest(search: "heron")).count == 1 && pages(store, ListRequest(search: "otter")).isEmpty)
        try settled(outside)
        #expect(try found("heron") == ["Renamed heron"] && found("river") == ["Renamed heron"])
        #expect(try found("otter").isEmpty && found("pelican").isEmpty && found("phantom").isEmpty)
        #expect(try found("walrus") == ["Kept walrus"])
        #expect(try queued() == 0)

        // Another program renames an item: queued (a delete and an insert), not yet
        // indexed (the index still finds the row by its old words).
        try await outside.write { db in try db.execute(sql: "UPDATE playable_items SET title = 'Outside badger' WHERE id = ?", arguments: [kept.id.rawValue]) }
        #expect(try queued() == 2)
        #expect(try found("badger").isEmpty && found("walrus") == ["Outside badger"])
        #expect(try pages(store, ListRequest(search: "badger")) == [kept.id.rawValue] && pages(store, ListRequest(search: "walrus")).isEmpty)
        // The server indexes it with its own writes.
        _ = try wait { store.games.create(GameInput(name: "Any", imageName: "a"), completion: $0) }
        try settled(outside)
        #expect(try queued() == 0 && found("badger") == ["Outside badger"] && found("walrus").isEmpty)
        // Written while the server is stopped: indexed when it opens the database again.
        try store.close()
        try await outside.write { db in try db.execute(sql: "UPDATE playable_items SET title = 'Offline beaver' WHERE id = ?", arguments: [kept.id.rawValue]) }
        #expect(try queued() == 2 && found("beaver").isEmpty)
        let reopened = try scratch.open()
        defer { try? reopened.close() }
        #expect(try queued() == 0 && found("beaver") == ["Offline beaver"] && found("badger").isEmpty)
        #expect(try pages(reopened, ListRequest(search: "beaver")) == [kept.id.rawValue])

        // A bulk load by another program (at least 1,000 queued rows for an index): indexed
        // at the next open and optimized into one segment. A smaller one is only indexed.
        func segments() throws -> Int {
            try outside.read { db in try Int.fetchOne(db, sql: "SELECT count(DISTINCT segid) FROM playable_items_fts_idx") ?? -1 }
        }
        func load(_ count: Int, _ word: String) async throws {
            try await outside.write { db in try Self.insertItems(db, count, titled: word) }
        }
        try reopened.close()
        try await load(SearchIndexQueue.bulk, "Bulk")
        let bulk = try scratch.open()
        #expect(try queued() == 0 && segments() == 1)
        #expect(try pages(bulk, ListRequest(limit: 100, search: "bulk")).count == SearchIndexQueue.bulk)
        try bulk.close()
        // Another program's edits of existing rows are not a load, however many.
        try await outside.write { db in try db.execute(sql: "UPDATE playable_items SET description = 'Edited'") }
        let edited = try scratch.open()
        #expect(try queued() == 0 && segments() == 2)
        #expect(try pages(edited, ListRequest(limit: 100, search: "edited")).count > SearchIndexQueue.bulk)
        try edited.close()
        try await load(10, "Trickle")
        let trickle = try scratch.open()
        defer { try? trickle.close() }
        #expect(try queued() == 0 && segments() == 3)
        #expect(try pages(trickle, ListRequest(limit: 100, search: "trickle")).count == 10)
    }

    /// A search reads at most the queue's first ``SQLiteDialect/searchedQueue`` writes: rows
    /// another program queued past them are found as the index has them (here, not yet),
    /// until the server's next batch applies the queue.
    @Test func aSearchReadsABoundedPartOfTheQueue() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let outside = try DatabaseQueue(path: scratch.database, configuration: Self.anotherProgram)
        let loaded = SQLiteDialect.searchedQueue + 500
        #expect(SQLiteDialect.searchedQueue < 2_400)
        try outside.write { db in try Self.insertItems(db, loaded, titled: "Outside") }
        #expect(try queued(outside) == loaded)
        // Few rows match either search: the index finds them, and the queue's first writes.
        func found(_ text: String) throws -> Int { try pages(store, ListRequest(limit: 100, search: text)).count }
        #expect(try found("100") == 11)  // 100 and 1000–1009, all among the first 2,048 queued
        #expect(try found("2400") == 0)  // queued past them
        _ = try wait { store.games.create(GameInput(name: "Any", imageName: "a"), completion: $0) }
        #expect(try queued(outside) == 0)
        #expect(try found("100") == 11 && found("2400") == 1)
    }

    /// How many index writes wait in the queue.
    private func queued(_ reader: DatabaseQueue) throws -> Int {
        try reader.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM search_index_queue") ?? -1 }
    }

    /// Waits until the writer has applied the queue: it does when it has had no job for
    /// the writer's settle delay (``GroupCommit``) after a batch. At most 10 s.
    private func settled(_ reader: DatabaseQueue) throws {
        let deadline = Date(timeIntervalSinceNow: 10)
        while try queued(reader) > 0 {
            guard Date() < deadline else { throw StoreError.unavailable("The search index queue was not applied.") }
            usleep(2_000)
        }
    }

    private func pages(_ store: CatalogStore, _ request: ListRequest) throws -> [String] {
        try pages(request, store.items, as: PlayableItem.self, id: \.id)
    }

    /// Inserts `count` items titled `word` and their number, as another program would
    /// (straight into the table: its triggers queue them for the search index).
    static func insertItems(_ db: Database, _ count: Int, titled word: String) throws {
        try db.execute(
            sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-8'
                             || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
                       ? || ' ' || i, '', 'https://example.com/' || i || '.m3u8', 1763000000000 + i, 1763000000000 + i, 1
                FROM n
                """, arguments: [count, word])
    }

    /// The ids of every page of `request`, as `list` answers them, following the cursors.
    private func pages<Model: Codable & Sendable & Hashable>(_ request: ListRequest, _ store: ResourceStore, as type: Model.Type, id: (Model) -> CatalogID) throws -> [String] {
        // What these tests check is what searches find: a loaded machine (the whole suite on
        // two cores) may hold one past the 100 ms a request's read may take (the budget's
        // own tests are elsewhere). The thread's allowance is put back after.
        let allowance = ReadBudget.allowance
        ReadBudget.allow(.seconds(10))
        defer { ReadBudget.allow(allowance) }
        var ids: [String] = []
        var request = request
        repeat {
            let page = try store.list(request, as: type)
            ids += page.items.map { id($0).rawValue }
            request.cursor = page.nextCursor
        } while request.cursor != nil
        return ids
    }
}

extension SearchTests {
    /// Another program's connection: it waits for the store's write lock, as a program would.
    static var anotherProgram: Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return configuration
    }
}
