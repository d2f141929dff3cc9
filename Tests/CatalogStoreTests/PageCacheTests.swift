import CatalogModels
import CatalogSchema
import Foundation
import GRDB
import Testing

@testable import CatalogStore

/// List pages kept between commits (``PageCache``): served again only while nothing has
/// committed, whoever committed.
@Suite struct PageCacheTests {
    @Test func aKeptPageIsServedUntilAnythingCommitsHereOrInAnotherProgram() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        var ids: [CatalogID] = []
        for index in 0..<25 {
            ids.append(
                try wait {
                    store.items.create(PlayableItemInput(title: "Clip \(index)", streamURL: URL(string: "https://example.com/\(index).m3u8")!), completion: $0)
                }.id)
        }
        let pages = try #require(store.items.pages, "playable items cache their renderings, and so their pages")
        let request = ListRequest(limit: 10)
        func kept(_ request: ListRequest) throws -> Bool {
            let generation = try #require(try store.database.generation())
            return pages.page(PageCache.Key(request, viewer: false), generation: generation) != nil
        }
        func text(_ page: (json: [UInt8], nextCursor: String?, digest: UInt64?)) -> String { String(decoding: page.json, as: UTF8.self) }
        /// The items' ids on a page, in its order.
        func pageIDs(_ json: [UInt8]) -> [CatalogID] {
            guard case let .object(page)? = try? JSONValue.parse(json), case let .array(items)? = page["items"] else { return [] }
            return items.compactMap { item in
                guard case let .object(fields) = item, case let .string(id)? = fields["id"] else { return nil }
                return CatalogID(id)
            }
        }

        let first = try store.items.renderedList(request)
        #expect(try kept(request))
        let again = try store.items.renderedList(request)
        #expect(again.digest != nil && again.digest == first.digest, "a kept page keeps its digest: it is not hashed again")
        #expect(again.json == first.json && again.nextCursor == first.nextCursor, "a kept page is the page, byte for byte")
        var next = request
        next.cursor = first.nextCursor
        let second = try store.items.renderedList(next)
        #expect(try kept(next) && kept(request))
        #expect(try store.items.renderedList(next).json == second.json)

        // A write through the store to an item on the page.
        _ = try wait {
            store.items.replace(
                ids[0], with: PlayableItemInput(title: "Renamed", streamURL: URL(string: "https://example.com/0.m3u8")!),
                preconditions: WritePreconditions(), completion: $0)
        }
        #expect(try !kept(request), "a commit ends every kept page")
        let renamed = try store.items.renderedList(request)
        #expect(text(renamed).contains("\"title\":\"Renamed\"") && !text(renamed).contains("\"title\":\"Clip 0\""))
        #expect(try kept(request))

        // A write by another program to an item on the page, and one elsewhere.
        let outside = try DatabaseQueue(path: scratch.database, configuration: Self.anotherProgram)
        try outside.write { db in
            try db.execute(sql: "UPDATE playable_items SET title = 'From outside', version = version + 1 WHERE id = ?", arguments: [ids[1].rawValue])
        }
        #expect(try !kept(request))
        #expect(text(try store.items.renderedList(request)).contains("\"title\":\"From outside\""))
        _ = try store.items.renderedList(next)
        // The list's order (creation time, then id): items created within the same
        // millisecond sort by the random part of their ids, not by when they were made.
        let listed = pageIDs(try store.items.renderedList(ListRequest(limit: 25)).json)
        #expect(Set(listed) == Set(ids))
        try outside.write { db in
            try db.execute(sql: "DELETE FROM playable_items WHERE id = ?", arguments: [listed[12].rawValue])
        }
        let shorter = try store.items.renderedList(next)
        #expect(pageIDs(shorter.json) == Array(listed[10..<12] + listed[13..<21]))
        try outside.close()

        // Only whole renderings of every field are kept: a page of some fields is not.
        var some = request
        some.fields = try #require(store.items.mask(["title"]))
        _ = try store.items.renderedList(some)
        #expect(try !kept(some))

        // Nor a page with an item too large for the render cache (over 8 KiB of JSON): it
        // could never be written again from there.
        _ = try wait {
            store.items.create(
                PlayableItemInput(
                    title: "Long", description: String(repeating: "€", count: 3_000),
                    streamURL: URL(string: "https://example.com/long.m3u8")!), completion: $0)
        }
        var last = ListRequest(limit: 10, order: .field("createdAt", descending: true))
        _ = try store.items.renderedList(last)
        #expect(try !kept(last))
        last.limit = 1
        last.cursor = try store.items.renderedList(last).nextCursor
        _ = try store.items.renderedList(last)
        #expect(try kept(last), "the next page, without it, is kept")
    }

    /// PostgreSQL's snapshots as generations (``PageCache/generation(ofSnapshot:)``): the
    /// same text keeps its generation; a newer snapshot (a higher `xmax`, or the same with
    /// fewer transactions running, or another server run) takes the next one; an older
    /// one, read before the newest, takes none (its page is not kept); what is not a
    /// snapshot (a server in recovery names none) neither.
    @Test func snapshotsTakeGenerationsOnlyForward() {
        let pages = PageCache()
        func generation(_ text: String) -> UInt64? {
            var text = text
            return text.withUTF8 { pages.generation(ofSnapshot: $0) }
        }
        #expect(pages.newestSnapshot == nil)
        #expect(generation("100:104:100,102 1764500000.5") == 1)
        #expect(generation("100:104:100,102 1764500000.5") == 1)
        #expect(generation("100:104:102 1764500000.5") == 2, "one of the running transactions ended")
        #expect(generation("100:104:100,102 1764500000.5") == nil, "read before the newest")
        #expect(generation("100:103:100 1764500000.5") == nil, "an older xmax")
        #expect(generation("102:107: 1764500000.5") == 3)
        #expect(pages.newestSnapshot?.text == "102:107: 1764500000.5" && pages.newestSnapshot?.generation == 3)
        #expect(generation("3:3: 1764600000.25") == 4, "another server run: numbers start again")
        for broken in ["", "3:3:", "x:y:z 1", "3:3 1"] { #expect(generation(broken) == nil, "\(broken)") }
        #expect(pages.newestSnapshot?.generation == 4)
    }

    @Test func theCacheHoldsAtMostItsPagesAndBytes() throws {
        func page(_ items: Int) -> PageCache.Page {
            var page = PageCache.Page()
            let id = Array(CatalogID().rawValue.utf8)
            for version in 0..<items { id.withUnsafeBufferPointer { page.append(id: $0, version: Int64(version), revision: 0) } }
            return page
        }
        func request(_ index: Int) -> PageCache.Key { PageCache.Key(ListRequest(limit: 10, cursor: "c\(index)"), viewer: false) }
        let byCount = PageCache(capacity: 3, maxBytes: 1 << 20)
        for index in 0..<3 { byCount.store(request(index), page(1), generation: 7) }
        #expect((0..<3).allSatisfy { byCount.page(request($0), generation: 7) != nil })
        #expect(byCount.page(request(0), generation: 8) == nil, "a page is kept for its generation only")
        byCount.store(request(2), page(2), generation: 7)
        #expect(byCount.page(request(0), generation: 7) != nil, "replacing a page does not start over")
        byCount.store(request(3), page(1), generation: 7)
        #expect(byCount.page(request(3), generation: 7) != nil && byCount.page(request(0), generation: 7) == nil, "full: it starts over")
        byCount.store(request(4), page(1), generation: 9)
        #expect(byCount.page(request(3), generation: 7) == nil && byCount.page(request(4), generation: 9) != nil, "a later generation drops the others")
        byCount.store(request(5), page(1), generation: 8)
        #expect(byCount.page(request(5), generation: 8) == nil, "nor is an earlier one kept after it")

        // A page of 20 items takes 256 bytes, its key's (about 84) and 20 × 53 (an id of
        // 36 bytes, its length and two numbers): about 1,400; three fit in 4,400, four do not.
        let byBytes = PageCache(capacity: 100, maxBytes: 4_400)
        for index in 0..<3 { byBytes.store(request(index), page(20), generation: 1) }
        #expect(byBytes.page(request(2), generation: 1) != nil && byBytes.page(request(0), generation: 1) != nil)
        byBytes.store(request(3), page(20), generation: 1)
        #expect(byBytes.page(request(3), generation: 1) != nil && byBytes.page(request(0), generation: 1) == nil)

        // The first pages keep their JSON, up to its budget; later ones their items only.
        let budget = PageCache(capacity: 100, maxBytes: 1 << 20, maxJSONBytes: 100)
        var whole = page(1)
        whole.json = Array(repeating: UInt8(ascii: " "), count: 60)
        budget.store(request(0), whole, generation: 1)
        budget.store(request(1), whole, generation: 1)
        #expect(budget.page(request(0), generation: 1)?.json?.count == 60)
        #expect(budget.page(request(1), generation: 1) != nil && budget.page(request(1), generation: 1)?.json == nil)
        // A page replaced without its JSON gives the bytes back; a new generation starts the budget again.
        budget.store(request(0), page(1), generation: 1)
        budget.store(request(2), whole, generation: 1)
        #expect(budget.page(request(2), generation: 1)?.json?.count == 60)
        budget.store(request(3), whole, generation: 2)
        #expect(budget.page(request(3), generation: 2)?.json?.count == 60)

        // Requests that Swift finds equal but that differ in what was sent have keys of their own.
        func key(_ change: (inout ListRequest) -> Void) -> PageCache.Key {
            var request = ListRequest()
            change(&request)
            return PageCache.Key(request, viewer: false)
        }
        #expect(ListRequest(search: "caf\u{E9}") == ListRequest(search: "cafe\u{301}"))
        #expect(key { $0.search = "caf\u{E9}" } != key { $0.search = "cafe\u{301}" })
        #expect(key { $0.areas = [.near(latitude: 0.0, longitude: 1, radiusMeters: 5)] } != key { $0.areas = [.near(latitude: -0.0, longitude: 1, radiusMeters: 5)] })
        #expect(key { $0.search = "" } != key { $0.search = nil })
        #expect(key { $0.search = "a" } == key { $0.search = "a" })
        let anonymous = ListRequest(viewer: .user(nil)), someone = ListRequest(viewer: .user(CatalogID()))
        #expect(PageCache.Key(anonymous, viewer: true) != PageCache.Key(someone, viewer: true))
        #expect(PageCache.Key(anonymous, viewer: false) == PageCache.Key(someone, viewer: false))

        // An item the render cache could not keep leaves its page incomplete.
        var missing = page(2)
        #expect(missing.isComplete)
        Array("x".utf8).withUnsafeBufferPointer { missing.append(id: $0, version: 1, revision: 0, held: false) }
        #expect(!missing.isComplete)

        // An item is read back as it was recorded.
        var recorded: [(String, Int64, Int64)] = []
        var two = PageCache.Page()
        for (id, version, revision) in [("a", Int64(1), Int64(0)), (CatalogID().rawValue, 42, -3)] {
            Array(id.utf8).withUnsafeBufferPointer { two.append(id: $0, version: version, revision: revision) }
        }
        #expect(
            two.forEachItem { id, version, revision in
                recorded.append((String(decoding: id, as: UTF8.self), version, revision))
                return true
            })
        #expect(recorded.map(\.0).first == "a" && recorded.map(\.1) == [1, 42] && recorded.map(\.2) == [0, -3])
    }
}

extension PageCacheTests {
    /// Another program's connection: it waits for the store's write lock, as a program would.
    static var anotherProgram: Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return configuration
    }
}
