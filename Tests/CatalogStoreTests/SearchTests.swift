import CatalogModels
import Foundation
import GRDB
import Testing
import TestSupport
@testable import CatalogStore

/// Searches find the same rows whichever way they are run: through the full-text index
/// (a search matching few rows), by testing each row a walk along the list's order reads
/// (`catalog_match`, for a search matching most rows), or through the index after a walk
/// that gave up; relevance ranks at most the newest 500 matches.
@Suite struct SearchTests {
    /// Titles and descriptions from a small vocabulary with accents, case and digits,
    /// so that some words are in most rows, some in few, and some are prefixes of others.
    static let vocabulary = ["Sample", "sámple", "SAMPLES", "video", "Vidéo", "cafe", "Café", "naïve", "zurich", "Zürich",
                             "x", "x1", "42", "4200", "trail", "trailer", "b"]

    @Test func everyStrategyFindsExactlyTheRowsTheIndexMatches() throws {
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
            let title = (index % 40 == 0 ? ["Zygote"] : []) + (index % 10 < 8 ? ["Sample"] : []) + words + (index >= count - 150 ? ["trending"] : [])
                + ["\(index)"]
            let description = (0..<(random.next() % 6)).map { _ in Self.vocabulary[Int(random.next() % UInt64(Self.vocabulary.count))] }
            group.enter()
            store.items.create(PlayableItemInput(title: title.joined(separator: " "), description: description.joined(separator: " "),
                                                 streamURL: URL(string: "https://example.com/\(index).m3u8")!)) { _ in group.leave() }
        }
        group.wait()
        let reader = try DatabaseQueue(path: scratch.database)
        for text in ["sample", "samp", "sámple", "SAMPLES", "video sample", "vid", "cafe", "café", "naive", "zur", "x", "x1", "42", "trail",
                     "trailer", "b", "sample 7", "nothing", "cafe zurich sample", "trending", "zygote", "zyg sample"] {
            let query = try #require(SearchQuery.fts5(text))
            // Every match, newest first, from the full-text index itself.
            let matches = try reader.read { db in
                try String.fetchAll(db, sql: """
                    SELECT id FROM playable_items WHERE pk IN (SELECT rowid FROM playable_items_fts WHERE playable_items_fts MATCH ?)
                    ORDER BY pk DESC
                    """, arguments: [query])
            }
            let byTitle = try reader.read { db in
                try String.fetchAll(db, sql: """
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
        let ranked = try store.items.list(ListRequest(order: .relevance, search: "trailer")).items.map(\.id)
        #expect(ranked == [twice, shortTitle, longTitle, inDescription])
    }

    private func pages(_ store: CatalogStore, _ request: ListRequest) throws -> [String] {
        var ids: [String] = []
        var request = request
        repeat {
            let page = try store.items.list(request)
            ids += page.items.map(\.id.rawValue)
            request.cursor = page.nextCursor
        } while request.cursor != nil
        return ids
    }
}
