import CatalogClient
import CatalogModels
import Foundation
import HTTPServer
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import CatalogService
@testable import CatalogStore

/// On PostgreSQL, a GET of one resource is sent from the event loop over the loop's own
/// non-blocking connections (`catalog-loop-reads` in `pg_stat_activity`): answers are the
/// very bytes the database pool's path gives, under more requests at once than the loop
/// has connections, in batches; a connection lost while idle or mid-read, or a read that
/// fails before others of its batch, costs no other request its answer; and closing the
/// store closes them.
@Suite struct LoopReadTests {
    /// A GET over its own connection, `Connection: close`, with `fields`: the raw answer.
    private static func get(_ port: Int, _ path: String, _ fields: String = "") throws -> String {
        try Loopback.blockingExchange(port: port, Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\(fields)\r\n".utf8))
    }

    /// The status of a raw answer, its `ETag`, `Link` and body.
    private static func parts(_ answer: String) -> (status: Int, etag: String?, body: String, link: String?) {
        let split = answer.components(separatedBy: "\r\n\r\n")
        let head = split.first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        func field(_ name: String) -> String? {
            head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix(name + ":") }.map {
                String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
            }
        }
        return (status, field("etag"), split.dropFirst().joined(separator: "\r\n\r\n"), field("link"))
    }

    /// The sessions of the loops' connections of `lane` to the test's database (`nil`: both lanes).
    private static func loopSessions(_ url: String, _ lane: PostgresLoopReader.Lane? = .quick, where condition: String = "true") throws -> Int64 {
        let names = lane.map { "'\($0.applicationName)'" } ?? "'catalog-loop-reads', 'catalog-loop-searches'"
        return try PostgresAdmin.integer(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name IN (\(names)) AND datname = current_database() AND \(condition)", at: url)
            ?? -1
    }

    /// Whether `condition` held within ten seconds, asked every few milliseconds.
    @discardableResult
    private static func poll(for limit: Duration = .seconds(10), _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    /// `count` items made for the test ("Item 0", …), their ids in order.
    private static func items(_ catalog: TestCatalog, _ count: Int) async throws -> [CatalogID] {
        var ids: [CatalogID] = []
        for index in 0..<count {
            ids.append(
                try await catalog.api.playableItems.create(PlayableItemInput(title: "Item \(index)", streamURL: URL(string: "https://example.com/\(index)")!)).value.id)
        }
        return ids
    }

    /// An item made for the test: its id, its path and the body the pool answers for it.
    private static func keptItem(_ catalog: TestCatalog) async throws -> (id: CatalogID, path: String, body: String) {
        let id = try await catalog.api.playableItems.create(PlayableItemInput(title: "Kept", streamURL: URL(string: "https://example.com/k")!)).value.id
        let path = "/v1/playable-items/\(id)"
        return (id, path, String(decoding: try await catalog.inProcess.get(path).body, as: UTF8.self))
    }

    /// Asks for `path` until a read has been sent from the loop (the first go to the pool
    /// while it connects): its one connection then has the statement prepared.
    private static func sentFromTheLoop(_ catalog: TestCatalog, _ path: String, answering body: String) async throws -> Bool {
        let port = catalog.client.baseURL.port ?? 0
        return try await poll {
            parts((try? await onThread { try get(port, path) }) ?? "").body == body && catalog.application.store.loopReads.sent > 0
        }
    }

    /// Each of `paths` is refused (400) from the loop as the pool refuses it, with the same problem code.
    private static func expectRefusedAsByThePool(_ paths: [String], _ catalog: TestCatalog) async throws {
        let port = catalog.client.baseURL.port ?? 0
        for path in paths {
            let pool = try await catalog.inProcess.get(path)
            let loop = Self.parts(try await onThread { try Self.get(port, path) })
            #expect(loop.status == pool.status && loop.status == 400, "\(path)")
            let code = { (body: String) in (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["code"] as? String }
            #expect(code(loop.body) == code(String(decoding: pool.body, as: UTF8.self)), "\(path): \(loop.body)")
        }
    }

    /// The heavy reads that went to the expensive reads' pool.
    private static func elsewhere(_ counts: LoopReadCounts) -> Int { counts.heavy.declined + counts.heavy.handedBack }

    private static func postgresURL(_ catalog: TestCatalog) throws -> String {
        guard case let .postgresql(url) = catalog.application.store.location else { throw Loopback.Failure(description: "not on PostgreSQL") }
        return url
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func manyGetsAtOnceGetTheBytesThePoolGives() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let ids = try await Self.items(catalog, 48)
            // What the pool gives (a request answered in process has no loop), to the same anonymous caller.
            let pool = APIClient(inProcess: catalog.application.server)
            var expected: [CatalogID: (etag: String?, body: String)] = [:]
            for id in ids {
                let answer = try await pool.get("/v1/playable-items/\(id)")
                #expect(answer.status == 200)
                expected[id] = (answer.header("ETag"), String(decoding: answer.body, as: UTF8.self))
            }
            #expect(catalog.application.store.loopReads.taken == 0, "in process, nothing is read from a loop")
            // One at a time until the loop has a connection (reads go to the pool while it connects)...
            let first = "/v1/playable-items/\(ids[0])"
            #expect(
                try await Self.poll {
                    Self.parts((try? await onThread { try Self.get(port, first) }) ?? "").body == expected[ids[0]]?.body
                        && catalog.application.store.loopReads.connections > 0
                })
            let before = catalog.application.store.loopReads
            // ...then all 48 at once, twice: more than it has connections, every one taken.
            for _ in 0..<2 {
                let answers = try await withThrowingTaskGroup(of: (CatalogID, String).self) { group in
                    for id in ids { group.addTask { (id, try await onThread { try Self.get(port, "/v1/playable-items/\(id)") }) } }
                    return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
                }
                for id in ids {
                    let got = Self.parts(answers[id] ?? "")
                    #expect(got.status == 200 && got.etag == expected[id]?.etag && got.body == expected[id]?.body, "\(id): \(answers[id] ?? "")")
                }
            }
            // An absent one is a 404 from the loop too; a shaped one and a conditional one as the pool answers them.
            let absent = Self.parts(try await onThread { try Self.get(port, "/v1/playable-items/\(CatalogID())") })
            #expect(absent.status == 404 && absent.body.contains("\"notFound\""))
            let shapedPath = "/v1/playable-items/\(ids[1])?fields=title,durationSeconds"
            let shaped = Self.parts(try await onThread { try Self.get(port, shapedPath) })
            let shapedByPool = try await pool.get(shapedPath)
            #expect(shaped.status == 200 && shaped.etag == shapedByPool.header("ETag") && shaped.body == String(decoding: shapedByPool.body, as: UTF8.self))
            let tag = expected[ids[2]]?.etag ?? ""
            let unchanged = Self.parts(try await onThread { try Self.get(port, "/v1/playable-items/\(ids[2])", "If-None-Match: \(tag)\r\n") })
            #expect(unchanged.status == 304 && unchanged.body.isEmpty && unchanged.etag == tag)
            let counts = catalog.application.store.loopReads
            #expect(counts.taken == before.taken + 99 && counts.declined == before.declined && counts.handedBack == 0, "\(counts)")
            #expect((1...PostgresLoopReader.connectionsPerLoop).contains(counts.connections), "\(counts)")
            // GETs sent together share one statement (`id = ANY`), each answered with its own
            // row: the same id asked twice at once, and ids that exist nowhere, among them.
            #expect(counts.shared > before.shared, "\(counts)")
            let absentIds = (0..<4).map { _ in CatalogID() }
            let paths = (ids.prefix(12) + ids.prefix(12) + absentIds).map { "/v1/playable-items/\($0)" }
            let mixed = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for (index, path) in paths.enumerated() { group.addTask { (index, try await onThread { try Self.get(port, path) }) } }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            for (index, id) in (ids.prefix(12) + ids.prefix(12)).enumerated() {
                let got = Self.parts(mixed[index] ?? "")
                #expect(got.status == 200 && got.etag == expected[id]?.etag && got.body == expected[id]?.body, "\(id): \(mixed[index] ?? "")")
            }
            for index in 24..<28 {
                let got = Self.parts(mixed[index] ?? "")
                #expect(got.status == 404 && got.body.contains("\"notFound\""), "\(mixed[index] ?? "")")
            }
            let afterMixed = catalog.application.store.loopReads
            #expect(afterMixed.taken == counts.taken + 28 && afterMixed.handedBack == 0 && afterMixed.shared > counts.shared, "\(afterMixed)")
            // The metrics say so.
            let metrics = String(decoding: try await catalog.inProcess.get("/metrics").body, as: UTF8.self)
            #expect(metrics.contains("catalog_db_loop_reads_total{outcome=\"taken\"} \(afterMixed.taken)"))
            #expect(metrics.contains("catalog_db_loop_reads_shared_total \(afterMixed.shared)"))
            // Closing the store closes the loops' connections, on their loops.
            let url = try Self.postgresURL(catalog)
            // (A session names itself before the loop counts it: the two agree once it is counted.)
            #expect(try await Self.poll { try Self.loopSessions(url) == Int64(catalog.application.store.loopReads.connections) })
            try catalog.application.store.close()
            #expect(try await Self.poll { try Self.loopSessions(url) == 0 }, "the loops' sessions end with the store")
            let closed = Self.parts(try await onThread { try Self.get(port, "/v1/playable-items/\(ids[3])") })
            #expect(closed.status == 503, "a closed store answers nothing: \(closed)")
            try catalog.stop()
        }
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aListPageFromTheLoopIsThePoolsPage() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            for index in 0..<30 {
                _ = try await catalog.api.playableItems.create(
                    PlayableItemInput(title: "Item \(index % 7) \(index)", description: "number \(index)", streamURL: URL(string: "https://example.com/\(index)")!))
            }
            let first = "/v1/playable-items?limit=5"
            #expect(
                try await Self.poll {
                    _ = try? await onThread { try Self.get(port, first) }
                    return catalog.application.store.loopReads.connections > 0
                })
            let before = catalog.application.store.loopReads
            // Pages in several orders and shapes, followed by their cursors, and refusals.
            var paths = [first, "/v1/playable-items?limit=4&sort=-title", "/v1/playable-items?limit=6&fields=title", "/v1/playable-items?sort=createdAt"]
            var checked = 0
            var fromLoop = 0
            while let path = paths.first, checked < 40 {
                paths.removeFirst()
                checked += 1
                let pool = try await APIClient(inProcess: catalog.application.server).get(path)
                let loop = Self.parts(try await onThread { try Self.get(port, path) })
                #expect(loop.status == pool.status && loop.etag == pool.header("ETag") && loop.link == pool.header("Link"), "\(path)")
                #expect(loop.body == String(decoding: pool.body, as: UTF8.self), "\(path)")
                fromLoop += 1
                if let link = loop.link, let start = link.firstIndex(of: "<"), let end = link.firstIndex(of: ">") {
                    paths.append(String(link[link.index(after: start)..<end]))
                }
            }
            #expect(checked > 10, "pages followed by their cursors")
            // One page asked by many at once just after a write (kept with its snapshot, and of
            // some fields): the reads of the same statement and arguments in a batch share one,
            // and each is answered whole, as the pool answers after the write.
            let sharedBefore = catalog.application.store.loopReads.shared
            for (index, path) in ["/v1/playable-items?limit=5&sort=-createdAt", "/v1/playable-items?limit=6&fields=title&sort=-createdAt"].enumerated() {
                _ = try await catalog.api.playableItems.create(
                    PlayableItemInput(title: "Newest \(index)", description: "new", streamURL: URL(string: "https://example.com/new/\(index)")!))
                let pool = try await APIClient(inProcess: catalog.application.server).get(path)
                #expect(String(decoding: pool.body, as: UTF8.self).contains("Newest \(index)"))
                let answers = try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<16 { group.addTask { try await onThread { try Self.get(port, path) } } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                for answer in answers.map(Self.parts) {
                    #expect(answer.status == 200 && answer.etag == pool.header("ETag") && answer.body == String(decoding: pool.body, as: UTF8.self), "\(path)")
                }
                fromLoop += 16
            }
            #expect(catalog.application.store.loopReads.shared > sharedBefore, "\(catalog.application.store.loopReads)")
            // Refused on the loop as on the pool: a bad cursor, a bad filter.
            try await Self.expectRefusedAsByThePool(["/v1/playable-items?cursor=AAAA", "/v1/playable-items?limit=0", "/v1/playable-items?sort=nothing"], catalog)
            let counts = catalog.application.store.loopReads
            #expect(counts.taken == before.taken + fromLoop && counts.declined == before.declined && counts.handedBack == 0, "\(counts)")
        }
    }

    /// A search (and a geographic list) is one statement on PostgreSQL too: sent from the
    /// loop as a heavy read, on connections of its own (`catalog-loop-searches`), its pages
    /// are the pool's bytes, followed by their cursors, and its refusals the pool's. Many at
    /// once are each answered: those the lane cannot take at once, on the expensive reads' pool.
    @Test(.enabled(if: TestEngine.postgresURL != nil)) func searchesFromTheLoopAreThePoolsPages() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: true)
            let port = catalog.client.baseURL.port ?? 0
            let url = try Self.postgresURL(catalog)
            for index in 0..<30 {
                _ = try await catalog.api.playableItems.create(
                    PlayableItemInput(
                        title: "Episode \(index % 7) \(index)", description: "number \(index) of the season", streamURL: URL(string: "https://example.com/\(index)")!))
            }
            // The first go to the expensive reads' pool while the lane connects.
            #expect(
                try await Self.poll {
                    _ = try? await onThread { try Self.get(port, "/v1/playable-items?q=season") }
                    return catalog.application.store.loopReads.heavy.taken > 0
                })
            let before = catalog.application.store.loopReads
            var paths = [
                "/v1/playable-items?q=number&limit=4", "/v1/playable-items?q=season&sort=-title&limit=5", "/v1/playable-items?q=episode%203&limit=2",
                "/v1/playable-items?q=season&fields=title,description&limit=7", "/v1/playable-items?q=nowhere", "/v1/games?q=the&limit=3",
                "/v1/locations?bbox=-10,35,20,60&sort=name&limit=2",
            ]
            var checked = 0
            while let path = paths.first, checked < 60 {
                paths.removeFirst()
                checked += 1
                let pool = try await APIClient(inProcess: catalog.application.server).get(path)
                let loop = Self.parts(try await onThread { try Self.get(port, path) })
                #expect(loop.status == 200 && loop.status == pool.status && loop.etag == pool.header("ETag") && loop.link == pool.header("Link"), "\(path)")
                #expect(loop.body == String(decoding: pool.body, as: UTF8.self), "\(path)")
                if let link = loop.link, let start = link.firstIndex(of: "<"), let end = link.firstIndex(of: ">") {
                    paths.append(String(link[link.index(after: start)..<end]))
                }
            }
            #expect(checked > 20, "pages followed by their cursors")
            // Refused on the loop as on the pool.
            try await Self.expectRefusedAsByThePool(
                ["/v1/playable-items?q=number&cursor=AAAA", "/v1/playable-items?q=number&limit=0", "/v1/playable-items?sort=relevance"], catalog)
            let sequential = catalog.application.store.loopReads
            // The refusals' bad cursor and limit are found before anything is sent.
            #expect(sequential.heavy.taken == before.heavy.taken + checked && sequential.taken == before.taken + checked, "\(before) → \(sequential)")
            #expect(sequential.declined == before.declined && sequential.handedBack == before.handedBack, "\(before) → \(sequential)")
            let sessions = Int(try Self.loopSessions(url, .heavy))
            #expect((1...PostgresLoopReader.connections(loops: 1, lane: .heavy)).contains(sessions), "\(sessions)")
            // Many at once (from six callers, each within its share of the expensive reads'
            // pool): each answered with the pool's page, from the loop or, when the lane could
            // not take it at once, from that pool.
            var keys: [String] = []
            for index in 0..<6 {
                let key = try catalog.user("Searcher \(index)").key
                // Known from now on without reading the database (the first use looks it up on the pool).
                _ = try await onThread { try Self.get(port, "/v1/me", "Authorization: Bearer \(key)\r\n") }
                keys.append(key)
            }
            let counts = catalog.application.store.loopReads
            let searches = (0..<24).map { "/v1/playable-items?q=number%20\($0 % 12)&limit=3" }
            var expected: [String: String] = [:]
            for path in searches { expected[path] = String(decoding: try await catalog.inProcess.get(path).body, as: UTF8.self) }
            let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for (index, path) in searches.enumerated() {
                    let key = keys[index % keys.count]
                    group.addTask { (index, try await onThread { try Self.get(port, path, "Authorization: Bearer \(key)\r\n") }) }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            for (index, path) in searches.enumerated() {
                let got = Self.parts(answers[index] ?? "")
                #expect(got.status == 200 && got.body == expected[path], "\(path): \(answers[index] ?? "")")
            }
            let after = catalog.application.store.loopReads
            #expect(
                after.heavy.taken - counts.heavy.taken + after.heavy.declined - counts.heavy.declined == searches.count,
                "every one taken or declined: \(counts) → \(after)")
            #expect(after.heavy.taken > counts.heavy.taken, "\(after)")
            let metrics = String(decoding: try await catalog.inProcess.get("/metrics").body, as: UTF8.self)
            #expect(metrics.contains("catalog_db_loop_heavy_reads_total{outcome=\"taken\"} \(after.heavy.taken)\n"))
            #expect(metrics.contains("catalog_db_loop_heavy_reads_total{outcome=\"declined\"} \(after.heavy.declined)\n"))
        }
    }

    /// A search that waits (here for a lock on its table) holds up no GET: heavy reads never
    /// share a batch or a connection with quick ones.
    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aSearchThatWaitsHoldsUpNoGet() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let url = try Self.postgresURL(catalog)
            let ids = try await Self.items(catalog, 8)
            _ = try await catalog.api.games.create(GameInput(name: "Waiting game", imageName: "g"))
            var expected: [CatalogID: String] = [:]
            for id in ids { expected[id] = String(decoding: try await catalog.inProcess.get("/v1/playable-items/\(id)").body, as: UTF8.self) }
            #expect(try await Self.sentFromTheLoop(catalog, "/v1/playable-items/\(ids[0])", answering: expected[ids[0]] ?? ""))
            #expect(
                try await Self.poll {
                    _ = try? await onThread { try Self.get(port, "/v1/games?q=waiting") }
                    return catalog.application.store.loopReads.heavy.taken > 0
                })
            // The search waits behind a lock on its table, under a loop read's statement
            // timeout (one second): on a machine so loaded that the steps below take longer,
            // the scenario is run again.
            var checked = false
            for _ in 0..<5 where !checked {
                let holder = Task {
                    try? await onThread { try PostgresAdmin.run("BEGIN; LOCK TABLE games IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT", at: url) }
                }
                let holding = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid() AND state = 'active'"
                #expect(try await Self.poll { try PostgresAdmin.integer(holding, at: url) == 1 })
                let search = Task { try await onThread { try Self.get(port, "/v1/games?q=waiting") } }
                let waiting = try await Self.poll { try Self.loopSessions(url, .heavy, where: "wait_event_type = 'Lock'") == 1 }
                // GETs sent together now are answered from the loop while the search waits.
                let before = catalog.application.store.loopReads
                let answers = try await withThrowingTaskGroup(of: (CatalogID, String).self) { group in
                    for id in ids { group.addTask { (id, try await onThread { try Self.get(port, "/v1/playable-items/\(id)") }) } }
                    return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
                }
                let stillWaiting = try Self.loopSessions(url, .heavy, where: "wait_event_type = 'Lock'") == 1
                let after = catalog.application.store.loopReads
                // While every connection of the lane holds a slow batch (out over 2 ms), a search
                // goes to the expensive reads' pool rather than wait (one more connection may
                // be made meanwhile, and take one first).
                var more: [Task<String, any Error>] = []
                for _ in 0..<PostgresLoopReader.connections(loops: 1, lane: .heavy) + 1 {
                    more.append(Task { try await onThread { try Self.get(port, "/v1/games?q=waiting") } })
                    if try await Self.poll(for: .milliseconds(500), { Self.elsewhere(catalog.application.store.loopReads) > Self.elsewhere(after) }) { break }
                }
                let wentElsewhere = Self.elsewhere(catalog.application.store.loopReads) > Self.elsewhere(after)
                _ = try PostgresAdmin.integer(
                    "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()", at: url)
                await holder.value
                let searched = Self.parts(try await search.value)
                for task in more {
                    let got = Self.parts(try await task.value)
                    #expect(got.status == 200 || got.status == 503, "\(got)")
                }
                for id in ids {
                    let got = Self.parts(answers[id] ?? "")
                    #expect(got.status == 200 && got.body == expected[id], "\(id): \(answers[id] ?? "")")
                }
                #expect(searched.status == 200 || searched.status == 503, "\(searched)")
                guard waiting, stillWaiting else { continue }
                checked = true
                #expect(searched.status == 200 && searched.body.contains("Waiting game"), "\(searched)")
                #expect(after.taken == before.taken + ids.count && after.handedBack == before.handedBack, "\(before) → \(after)")
                #expect(wentElsewhere, "a search sent while the lane's batches are slow goes to the pool")
            }
            #expect(checked, "the search seen waiting while the GETs were answered")
        }
    }

    /// A page of a list read from the loop is kept with the database snapshot it was read
    /// in, and answered as kept while PostgreSQL is still there (no row read). Any write
    /// moves the snapshot on, even one made straight in SQL (which no server hears of):
    /// the next page is read again. Every answer is the pool's bytes at that moment.
    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aKeptPageIsAnsweredUntilTheDatabaseChanges() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let url = try Self.postgresURL(catalog)
            let ids = try await Self.items(catalog, 6)
            let path = "/v1/playable-items?limit=4"
            let pool = APIClient(inProcess: catalog.application.server)
            // The loop's answer, checked against the pool's read of the database as it is now.
            let page = { (label: String) async throws -> String in
                let expected = try await pool.get(path)
                let body = String(decoding: expected.body, as: UTF8.self)
                let loop = Self.parts(try await onThread { try Self.get(port, path) })
                #expect(expected.status == 200 && loop.status == 200, "\(label): \(loop)")
                #expect(loop.body == body && loop.etag == expected.header("ETag") && loop.link == expected.header("Link"), "\(label): \(loop)")
                return loop.body
            }
            // Asked until a page is answered as kept (the loop connects first, and any
            // commit in the cluster, other tests' among them, moves the snapshot on too).
            let answeredAsKept = {
                try await Self.poll(for: .seconds(30)) {
                    let before = catalog.application.store.loopReads.unchangedPages
                    _ = try await page("kept")
                    return catalog.application.store.loopReads.unchangedPages > before
                }
            }
            #expect(try await answeredAsKept(), "a page answered as kept")
            // Changed through the API, straight in SQL, and by a deletion: the next page shows each.
            _ = try await catalog.api.playableItems.patch(ids[0], MergePatch().set("title", "Renamed"))
            #expect(try await page("after a change through the API").contains("\"title\":\"Renamed\""))
            try PostgresAdmin.run("UPDATE playable_items SET title = 'Renamed in SQL' WHERE id = '\(ids[1].rawValue)'", at: url)
            #expect(try await page("after a change in SQL").contains("\"title\":\"Renamed in SQL\""))
            #expect(try await answeredAsKept(), "kept again while nothing changes")
            try await catalog.api.playableItems.delete(ids[2])
            let afterDeletion = try await page("after a deletion")
            #expect(!afterDeletion.contains(ids[2].rawValue) && afterDeletion.contains(ids[4].rawValue))
            // An empty page is kept too.
            try PostgresAdmin.run("DELETE FROM playable_items", at: url)
            #expect(try await page("after every item went").hasPrefix("{\"items\":[]"))
            #expect(try await answeredAsKept(), "an empty page answered as kept")
            let metrics = String(decoding: try await catalog.inProcess.get("/metrics").body, as: UTF8.self)
            #expect(metrics.contains("catalog_db_loop_pages_unchanged_total \(catalog.application.store.loopReads.unchangedPages)"))
        }
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aPrivatePlaylistIsItsOwnersOnTheLoopToo() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let owner = try catalog.user("Owner"), other = try catalog.user("Other")
            let made = try await catalog.client(key: owner.key).send("POST", "/v1/playlists", json: ["title": "Mine", "visibility": "private"])
            #expect(made.status == 201)
            let path = "/v1/playlists/\(try made.decode(Playlist.self).id)"
            let warm = try await Self.poll {
                _ = try? await onThread { try Self.get(port, path) }
                return catalog.application.store.loopReads.connections > 0
            }
            #expect(warm)
            // Each caller gets from the loop what the pool gives it: the owner and an admin
            // the playlist, anyone else a 404. (Asked again until the loop took the read: a
            // caller looked up on the pool, as after a lapsed credentials lease on a loaded
            // machine, is answered there.)
            for (key, status) in [(owner.key, 200), (catalog.adminKey, 200), (other.key, 404), (nil, 404)] {
                let pool = try await APIClient(inProcess: catalog.application.server, key: key).get(path)
                var loop = (status: 0, etag: String?.none, body: "", link: String?.none)
                let taken = try await Self.poll {
                    let before = catalog.application.store.loopReads.taken
                    loop = Self.parts(try await onThread { try Self.get(port, path, key.map { "Authorization: Bearer \($0)\r\n" } ?? "") })
                    return catalog.application.store.loopReads.taken == before + 1
                }
                #expect(taken && loop.status == status && pool.status == status)
                if status == 200 { #expect(loop.body == String(decoding: pool.body, as: UTF8.self) && loop.etag == pool.header("ETag")) }
            }
        }
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aLostConnectionCostsNoRequestItsAnswer() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let url = try Self.postgresURL(catalog)
            let (_, path, expected) = try await Self.keptItem(catalog)
            // Until the loop has a connection (the first reads go to the pool while it connects).
            let connected = try await Self.poll {
                #expect(Self.parts((try? await onThread { try Self.get(port, path) }) ?? "").body == expected)
                return catalog.application.store.loopReads.connections >= 1
            }
            #expect(connected)

            // Killed while idle: the next reads are answered all the same, and it is made again.
            _ = try PostgresAdmin.integer(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'catalog-loop-reads' AND datname = current_database()",
                at: url)
            let opened = catalog.application.store.loopReads.connections
            let reconnected = try await Self.poll {
                let got = Self.parts((try? await onThread { try Self.get(port, path) }) ?? "")
                #expect(got.status == 200 && got.body == expected)
                return catalog.application.store.loopReads.connections > opened
            }
            #expect(reconnected, "a connection made again")

            // Killed mid-read: the read is handed to the pool and answered from there. The
            // read is held by a lock on the table, under a loop read's statement timeout
            // (one second): on a machine so loaded that the steps below take longer, it times
            // out first (answered 503, as an over-long read is), or it is not seen waiting
            // before the lock goes (answered 200 from wherever it ran), and the scenario is
            // run again.
            var handedBack = false
            for _ in 0..<5 where !handedBack {
                let counts = catalog.application.store.loopReads
                let before = counts.handedBack
                let holder = Task {
                    try? await onThread {
                        try PostgresAdmin.run("BEGIN; LOCK TABLE playable_items IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT", at: url)
                    }
                }
                let holding = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid() AND state = 'active'"
                #expect(try await Self.poll { try PostgresAdmin.integer(holding, at: url) == 1 })
                let answer = Task { try await onThread { try Self.get(port, path) } }
                let waiting = try await Self.poll { try Self.loopSessions(url, where: "wait_event_type = 'Lock'") > 0 }
                _ = try PostgresAdmin.integer(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'catalog-loop-reads' AND datname = current_database() AND wait_event_type = 'Lock'",
                    at: url)
                // The lock goes at once: the read handed to the pool finds the table free.
                _ = try PostgresAdmin.integer(
                    "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()", at: url)
                await holder.value
                let got = Self.parts(try await answer.value)
                handedBack = catalog.application.store.loopReads.handedBack > before
                let after = catalog.application.store.loopReads
                if handedBack {
                    #expect(waiting && got.status == 200 && got.body == expected, "\(got)")
                } else if waiting {
                    #expect(got.status == 503, "seen waiting on the loop, not handed back: timed out there first: \(got), \(counts) → \(after)")
                } else {
                    #expect((got.status == 200 && got.body == expected) || got.status == 503, "not seen waiting in time: \(got), \(counts) → \(after)")
                }
            }
            #expect(handedBack, "a read lost mid-way is handed to the pool")
        }
    }

    /// Many reads at once leave in batches (pipelined, with one `Sync`). A statement that
    /// fails (cancelled) cuts its batch short: a read's own statement answers it with its
    /// error, and a statement the batch's GETs shared (one for all their ids) sends them
    /// again; the reads after it, which PostgreSQL did not run, go back to the loop's line,
    /// are sent again and answered from the loop (or from the pool, when it was their
    /// statement's preparation that failed).
    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aReadThatFailsCostsTheRestOfItsBatchNothing() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let url = try Self.postgresURL(catalog)
            let ids = try await Self.items(catalog, 24)
            var expected: [CatalogID: String] = [:]
            for id in ids { expected[id] = String(decoding: try await catalog.inProcess.get("/v1/playable-items/\(id)").body, as: UTF8.self) }
            #expect(try await Self.sentFromTheLoop(catalog, "/v1/playable-items/\(ids[0])", answering: expected[ids[0]] ?? ""))
            // The reads wait behind a lock on the table until their batches' first statements
            // are cancelled. A loop read's statement times out after one second: on a machine
            // so loaded that the steps below take longer, the scenario is run again.
            var checked = false
            for _ in 0..<5 where !checked {
                let before = catalog.application.store.loopReads
                let holder = Task {
                    try? await onThread {
                        try PostgresAdmin.run("BEGIN; LOCK TABLE playable_items IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT", at: url)
                    }
                }
                let holding = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid() AND state = 'active'"
                #expect(try await Self.poll { try PostgresAdmin.integer(holding, at: url) == 1 })
                let started = ContinuousClock.now
                let answers = Task {
                    try await withThrowingTaskGroup(of: (CatalogID, String).self) { group in
                        for id in ids { group.addTask { (id, try await onThread { try Self.get(port, "/v1/playable-items/\(id)") }) } }
                        return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
                    }
                }
                // Every read taken or declined, every one taken sent, and every batch sent
                // waiting for the lock.
                let settled = try await Self.poll {
                    let now = catalog.application.store.loopReads
                    let batches = now.batches - before.batches, taken = now.taken - before.taken
                    guard taken + now.declined - before.declined == ids.count, now.sent - before.sent == taken, batches > 0 else { return false }
                    return try Self.loopSessions(url, where: "wait_event_type = 'Lock'") == Int64(batches)
                }
                let atCancel = catalog.application.store.loopReads
                let cancelled =
                    try PostgresAdmin.integer(
                        "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE application_name = 'catalog-loop-reads' AND datname = current_database() AND wait_event_type = 'Lock'",
                        at: url) ?? -1
                _ = try PostgresAdmin.integer(
                    "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()", at: url)
                let inTime = ContinuousClock.now - started < .milliseconds(700)
                await holder.value
                let got = try await answers.value.mapValues(Self.parts)
                guard settled, inTime else { continue }
                checked = true
                let after = catalog.application.store.loopReads
                let taken = atCancel.taken - before.taken, batches = atCancel.batches - before.batches
                #expect(Int64(batches) == cancelled && batches < taken, "some batch held more than one read: \(before) \(atCancel)")
                // At most one read a batch failed, with its own error: a read alone in its
                // statement (the GETs of a batch share one, whose failure is none of theirs
                // alone: they were sent again). The reads after it went back to the line once,
                // were sent again and answered from the loop; those of a batch whose
                // preparation was cancelled went to the pool.
                let failed = got.values.filter { $0.status == 503 }
                #expect(failed.count <= batches, "\(got.values.map(\.status))")
                #expect(failed.allSatisfy { $0.body.contains("\"tooExpensive\"") }, "\(failed)")
                let resent = after.resent - before.resent, handedBack = after.handedBack - before.handedBack
                #expect(failed.count + resent + handedBack == taken, "\(before) \(after)")
                #expect(after.sent - before.sent == taken + resent, "\(before) \(after)")
                for id in ids where got[id]?.status != 503 {
                    #expect(got[id]?.status == 200 && got[id]?.body == expected[id], "\(id): \(String(describing: got[id]))")
                }
            }
            #expect(checked, "the scenario ran within a read's statement timeout")
            try catalog.stop()
        }
    }

    /// A statement prepared before a migration changed what it reads ("cached plan must not
    /// change result type") is prepared again, and its read sent again and answered: a
    /// rolling upgrade costs the loops' reads, the pool's and the writers' nothing.
    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aStatementAMigrationMadeStaleIsPreparedAgain() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let port = catalog.client.baseURL.port ?? 0
            let url = try Self.postgresURL(catalog)
            let (id, path, expected) = try await Self.keptItem(catalog)
            #expect(try await Self.sentFromTheLoop(catalog, path, answering: expected))
            for type in ["varchar(4000)", "text"] {
                try PostgresAdmin.run("ALTER TABLE playable_items ALTER COLUMN thumbnail_url TYPE \(type)", at: url)
                let before = catalog.application.store.loopReads
                let got = Self.parts(try await onThread { try Self.get(port, path) })
                let after = catalog.application.store.loopReads
                #expect(got.status == 200 && got.body == expected, "\(got)")
                // Sent, refused as stale, put back, prepared and sent again, on the loop.
                #expect(after.taken - before.taken == 1 && after.resent - before.resent == 1, "\(before) \(after)")
                #expect(after.sent - before.sent == 2 && after.handedBack == before.handedBack, "\(before) \(after)")
                // The pool's reads and the writers prepare theirs again too.
                let pooled = try await catalog.inProcess.get(path)
                #expect(pooled.status == 200 && String(decoding: pooled.body, as: UTF8.self) == expected)
                let page = try await catalog.inProcess.get("/v1/playable-items?limit=5")
                #expect(page.status == 200 && String(decoding: page.body, as: UTF8.self).contains(id.description))
                _ = try await catalog.api.playableItems.create(PlayableItemInput(title: "After \(type)", streamURL: URL(string: "https://example.com/a")!))
            }
            try catalog.stop()
        }
    }
}
