import CatalogModels
import Foundation
import GRDB
import Synchronization
import TestSupport
import Testing

@testable import CatalogStore

let repositoryMigrations = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Migrations")

/// A temporary folder with a copy of the repository's migrations and room for a database.
final class Scratch {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-store-\(UUID().uuidString)")
    var migrations: URL { directory.appendingPathComponent("Migrations") }
    var database: String { directory.appendingPathComponent("data/catalog.sqlite").path }

    init() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: repositoryMigrations, to: migrations)
    }

    func open() throws -> CatalogStore {
        try CatalogStore(path: database, migrations: Migration.load(from: migrations))
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// Waits for a completion-style store write.
func wait<T: Sendable>(_ start: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void) throws -> T {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var outcome: Result<T, any Error>?
    start { result in
        outcome = result
        done.signal()
    }
    done.wait()
    return try outcome!.get()
}

@Suite struct MigrationTests {
    @Test func appliesOnceAndRecordsChecksums() throws {
        let scratch = try Scratch()
        let first = try scratch.open()
        let files = try FileManager.default.contentsOfDirectory(atPath: scratch.migrations.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files.count >= 4)
        #expect(first.appliedMigrations == files)
        try first.close()
        let second = try scratch.open()
        #expect(second.appliedMigrations.isEmpty)
        try second.close()
        let queue = try DatabaseQueue(path: scratch.database)
        let row = try queue.read { try Row.fetchOne($0, sql: "SELECT file_name, checksum FROM schema_migrations WHERE version = 1") }
        let data = try Data(contentsOf: scratch.migrations.appendingPathComponent("0001_create_catalog.sql"))
        #expect(row?["checksum"] == Migration.checksum(data))
    }

    @Test func aMigrationChangedAfterApplyingStopsStartupNamingTheFile() throws {
        let scratch = try Scratch()
        try scratch.open().close()
        let file = scratch.migrations.appendingPathComponent("0001_create_catalog.sql")
        try (String(contentsOf: file, encoding: .utf8) + "\n-- edited\n").write(to: file, atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.modifiedAfterApplying("0001_create_catalog.sql")) { try scratch.open() }
        #expect("\(MigrationError.modifiedAfterApplying("0001_create_catalog.sql"))".contains("0001_create_catalog.sql"))
    }

    @Test func aNewMigrationIsAppliedInOrderAndAFailingOneRollsBack() throws {
        let scratch = try Scratch()
        try scratch.open().close()
        try "ALTER TABLE games ADD COLUMN publisher TEXT;".write(to: scratch.migrations.appendingPathComponent("9001_add_publisher.sql"), atomically: true, encoding: .utf8)
        let store = try scratch.open()
        #expect(store.appliedMigrations == ["9001_add_publisher.sql"])
        try store.close()
        try "CREATE TABLE t (x); SELECT no_such_function();".write(to: scratch.migrations.appendingPathComponent("9002_broken.sql"), atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.self) { try scratch.open() }
        let queue = try DatabaseQueue(path: scratch.database)
        #expect(try queue.read { try $0.tableExists("t") } == false, "a failed migration leaves nothing behind")
    }

    @Test func anAppliedMigrationMissingFromThisBuildIsRefused() throws {
        let scratch = try Scratch()
        try "SELECT 1;".write(to: scratch.migrations.appendingPathComponent("9001_noop.sql"), atomically: true, encoding: .utf8)
        try scratch.open().close()
        try FileManager.default.removeItem(at: scratch.migrations.appendingPathComponent("9001_noop.sql"))
        #expect(throws: MigrationError.unknownApplied(version: 9001, fileName: "9001_noop.sql")) { try scratch.open() }
    }

    @Test func misnamedFilesAreRefused() throws {
        let scratch = try Scratch()
        try "SELECT 1;".write(to: scratch.migrations.appendingPathComponent("2_oops.sql"), atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.misnamed("2_oops.sql")) { try scratch.open() }
    }

    @Test func sha256KnownAnswers() {
        #expect(Migration.checksum(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Migration.checksum(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Migration.checksum(Data(String(repeating: "a", count: 1000).utf8)) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }
}

@Suite struct StoreBehaviourTests {
    /// Since 0008 an item's own change row has no subject; `playableItemId=` finds it by
    /// (type, id), and still finds rows logged before, whose subject is the item's id.
    @Test func anItemsOwnChangeIsFoundByItsIdWhetherLoggedBeforeOrSince0008() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let input = PlayableItemInput(title: "Logged", description: "", streamURL: URL(string: "https://example.com/v.m3u8")!)
        let earlier = try wait { store.items.create(input, completion: $0) }
        let later = try wait { store.items.create(input, completion: $0) }
        let queue = try DatabaseQueue(path: scratch.database)
        try queue.write { db in
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM changes WHERE type = 'playableItem' AND subject IS NOT NULL") == 0)
            // `earlier` as 0006's trigger logged it.
            try db.execute(sql: "UPDATE changes SET subject = id WHERE id = ?", arguments: [earlier.id.rawValue])
        }
        for item in [earlier, later] {
            for viewer: Viewer? in [nil, .user(nil)] {
                let batch = try store.changes.read(after: 0, filter: ChangeFilter(playableItemID: item.id), viewer: viewer, limit: 10, maxBytes: 1 << 20)
                #expect(batch.records.map(\.id) == [item.id.rawValue])
            }
        }
    }

    @Test func connectionsAreConfiguredForDurability() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let database = try #require(Mirror(reflecting: store).descendant("database") as? SQLiteDatabase)
        let (journal, synchronous, foreignKeys) = try database.pool.write { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"), try Int.fetchOne(db, sql: "PRAGMA foreign_keys"))
        }
        #expect(journal == "wal")
        #expect(synchronous == 2, "FULL")
        #expect(foreignKeys == 1)
        #expect(store.engineVersion.hasPrefix("SQLite 3."))
    }

    @Test func seedsOnlyAnEmptyCatalog() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        #expect(try store.seedDemoCatalogIfEmpty())
        #expect(try store.games.count() == 4)
        #expect(try store.locations.count() >= 20)
        #expect(try store.items.count() >= 10)
        // The demo playlists hold every item they name, in order, at dense positions.
        let playlists = try store.playlists.list(ListRequest(order: .field("title", descending: false)), as: Playlist.self).items
        #expect(playlists.map(\.title) == DemoCatalog.playlists.map(\.input.title).sorted())
        for (playlist, demo) in zip(playlists, DemoCatalog.playlists.sorted { $0.input.title < $1.input.title }) {
            let page = try CatalogJSON.makeDecoder().decode(Page<PlaylistEntry>.self, from: Data(store.entries.page(of: playlist.id, limit: 100, cursor: nil).json))
            #expect(page.items.map(\.playableItem.title) == demo.itemTitles)
            #expect(page.items.map(\.position) == Array(0..<demo.itemTitles.count))
            #expect(playlist.entryCount == demo.itemTitles.count)
        }
        let bunny = try #require(store.items.list(ListRequest(limit: 1, order: .relevance, search: "Big Buck Bunny"), as: PlayableItem.self).items.first)
        let thread = try store.comments.resources.list(ListRequest(scope: .commentsOn(item: bunny.id)), as: CatalogModels.Comment.self).items
        #expect(thread.map(\.replyCount) == [1])
        #expect(try store.comments.resources.list(ListRequest(scope: .repliesTo(comment: thread[0].id)), as: CatalogModels.Comment.self).items.map(\.author) == ["Ben"])
        #expect(try store.seedDemoCatalogIfEmpty() == false)
        #expect(try store.games.count() == 4)
        // Emptied by its users, the catalog stays empty across restarts.
        for page in try store.games.list(ListRequest(limit: 100), as: Game.self).items {
            try wait { store.games.delete(page.id, preconditions: WritePreconditions(), completion: $0) }
        }
        #expect(try store.seedDemoCatalogIfEmpty() == false)
        #expect(try store.games.count() == 0)
    }

    @Test func keysetPagesCoverEveryOrderExactly() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        // Many equal titles and identical timestamps force the id tie-break.
        for index in 0..<300 {
            _ = try wait { store.games.create(GameInput(name: ["Alpha", "beta", "Gamma"][index % 3], imageName: "g\(index)"), completion: $0) }
        }
        let all = try store.games.list(ListRequest(limit: 100, order: .field("name", descending: false)), as: Game.self)
        #expect(all.items.count == 100)
        for order in [
            ListRequest.Order.field("name", descending: false), .field("name", descending: true),
            .field("createdAt", descending: false), .field("createdAt", descending: true),
        ] {
            var seen: [CatalogID] = []
            var cursor: String?
            repeat {
                let page = try store.games.list(ListRequest(limit: 7, order: order, cursor: cursor), as: Game.self)
                seen += page.items.map(\.id)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(seen.count == 300, "\(order)")
            #expect(Set(seen).count == 300, "\(order): no duplicates")
        }
        let first = try store.games.list(ListRequest(limit: 5, order: .field("name", descending: false)), as: Game.self)
        #expect(throws: StoreError.self) {
            try store.games.list(ListRequest(limit: 5, order: .field("name", descending: true), cursor: first.nextCursor), as: Game.self)
        }
    }

    @Test func cursorsOfTheWrongShapeAreRefused() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let byCreation = ListRequest(limit: 5, order: .field("createdAt", descending: false))
        let byRelevance = ListRequest(limit: 5, order: .relevance, search: "joust")
        let cases: [(ListRequest, ListCursor.Key, String, Bool)] = [
            (byCreation, .integer(5), CatalogID().rawValue, true),
            (byCreation, .text("5"), CatalogID().rawValue, false),
            (byCreation, .integer(5), "not-an-id", false),
            (byRelevance, .real(-1.5), CatalogID().rawValue, true),
            (byRelevance, .real(.nan), CatalogID().rawValue, false),
            (byRelevance, .integer(1), CatalogID().rawValue, false),
        ]
        for (request, key, id, accepted) in cases {
            var withCursor = request
            withCursor.cursor = ListCursor(fingerprint: "games|\(request.fingerprint)", key: key, id: id).encoded()
            let outcome = Result { () throws(StoreError) in try store.games.renderedList(withCursor) }
            #expect(((try? outcome.get()) != nil) == accepted, "\(request.order) \(key) \(id)")
        }
    }

    @Test func fullTextIndexFollowsUpdatesAndDeletes() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let game = try wait { store.games.create(GameInput(name: "Tempest", description: "Vector shooter", imageName: "tempest"), completion: $0) }
        #expect(try store.games.list(ListRequest(order: .relevance, search: "vector"), as: Game.self).items.map(\.id) == [game.id])
        _ = try wait {
            store.games.replace(
                game.id, with: GameInput(name: "Robotron", description: "Twin-stick", imageName: "r"), preconditions: WritePreconditions(ifMatch: .versions([1])), completion: $0)
        }
        #expect(try store.games.list(ListRequest(order: .relevance, search: "vector"), as: Game.self).items.isEmpty)
        #expect(try store.games.list(ListRequest(order: .relevance, search: "twin"), as: Game.self).items.map(\.id) == [game.id])
        try wait { store.games.delete(game.id, preconditions: WritePreconditions(), completion: $0) }
        #expect(try store.games.list(ListRequest(order: .relevance, search: "twin"), as: Game.self).items.isEmpty)
    }

    @Test func failedWritesInABatchDoNotUndoOthers() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let group = DispatchGroup()
        let results = Mutex<[Bool]>([])
        for index in 0..<50 {
            group.enter()
            if index % 5 == 0 {
                store.games.delete(CatalogID(), preconditions: WritePreconditions()) { result in
                    results.withLock { $0.append((try? result.get()) != nil) }
                    group.leave()
                }
            } else {
                store.games.create(GameInput(name: "G\(index)", imageName: "g")) { result in
                    results.withLock { $0.append((try? result.get()) != nil) }
                    group.leave()
                }
            }
        }
        group.wait()
        #expect(results.withLock { $0.filter { $0 }.count } == 40)
        #expect(try store.games.count() == 40)
    }

    @Test func heavyWritesTakeTurnsWithLightOnes() async throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let database = try #require(Mirror(reflecting: store).descendant("database") as? SQLiteDatabase)
        let order = Mutex<[String]>([])
        try await onThread { () throws -> Void in
            let group = DispatchGroup()
            func submit(_ name: String, heavy: Bool) {
                group.enter()
                database.writes.submit(
                    heavy: heavy,
                    { _ in
                        if heavy { usleep(100_000) }
                        order.withLock { $0.append(name) }
                    }, completion: { _ in group.leave() })
            }
            // The first heavy job is running when the rest arrive: a second heavy one, then a light one.
            submit("heavy 1", heavy: true)
            usleep(30_000)
            submit("heavy 2", heavy: true)
            submit("light", heavy: false)
            group.wait()
            // Abandoned work is dropped unrun.
            group.enter()
            database.writes.submit(
                WriteOptions(abandonedWhen: { true }), { _ in order.withLock { $0.append("abandoned") } },
                completion: { result in
                    #expect((try? result.get()) == nil)
                    group.leave()
                })
            group.wait()
        }
        #expect(order.withLock { $0 } == ["heavy 1", "light", "heavy 2"], "the light write did not wait for both heavy ones")
    }

    @Test func completionsRunWhereTheSubmitterAsksAndSynchronousWritesStillReturn() async throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        try await onThread { () throws -> Void in
            let answers = DispatchQueue(label: "answers")
            let key = DispatchSpecificKey<Bool>()
            answers.setSpecific(key: key, value: true)
            let handedOver = Atomic<Int>(0)
            let ranOnAnswers = Mutex<[Bool]>([])
            let group = DispatchGroup()
            let options = WriteOptions(answeredOn: { block in
                handedOver.add(1, ordering: .relaxed)
                answers.async(execute: block)
            })
            for index in 0..<3 {
                group.enter()
                // The third fails (no such game): failures are answered there too.
                let done: @Sendable (Bool) -> Void = { _ in
                    ranOnAnswers.withLock { $0.append(DispatchQueue.getSpecific(key: key) == true) }
                    group.leave()
                }
                if index < 2 {
                    store.games.create(GameInput(name: "G\(index)", imageName: "g"), options: options) { done((try? $0.get()) != nil) }
                } else {
                    store.games.delete(CatalogID(), preconditions: WritePreconditions(), options: options) { done((try? $0.get()) != nil) }
                }
            }
            group.wait()
            #expect(handedOver.load(ordering: .relaxed) == 3)
            #expect(ranOnAnswers.withLock { $0 } == [true, true, true])
            // A write waited for on this thread is answered on the writer's thread: this
            // thread, waiting, could not run the answer.
            let database = try #require(Mirror(reflecting: store).descendant("database") as? SQLiteDatabase)
            let before = handedOver.load(ordering: .relaxed)
            let count = try database.write { db in try db.fetchValue("SELECT count(*) FROM games", []).int }
            #expect(count == 2)
            #expect(handedOver.load(ordering: .relaxed) == before)
            // answeredAtCommit of such options: the answer runs on the writer's thread.
            let sameThread = Mutex<Bool?>(nil)
            group.enter()
            database.submit(
                options.answeredAtCommit, atomic: false, heavy: false, { _ in UInt(pthread_self()) },
                completion: { result in
                    sameThread.withLock { $0 = (try? result.get()) == UInt(pthread_self()) }
                    group.leave()
                })
            group.wait()
            #expect(sameThread.withLock { $0 } == true)
            #expect(handedOver.load(ordering: .relaxed) == before)
        }
    }

    @Test func aWriteThatRollsTheTransactionBackFailsItsWholeBatchAndNothingRunsOutsideIt() async throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let database = try #require(Mirror(reflecting: store).descendant("database") as? SQLiteDatabase)
        let first = try wait { store.games.create(GameInput(name: "First", imageName: "g"), completion: $0) }
        let second = try wait { store.games.create(GameInput(name: "Second", imageName: "g"), completion: $0) }
        let outcomes = Mutex<[String: Bool]>([:])
        try await onThread { () throws -> Void in
            let group = DispatchGroup()
            func record(_ name: String) -> @Sendable (Bool) -> Void {
                { succeeded in
                    outcomes.withLock { $0[name] = succeeded }
                    group.leave()
                }
            }
            // A heavy job runs alone; the three light ones queued meanwhile make one batch.
            let started = DispatchSemaphore(value: 0), queued = DispatchSemaphore(value: 0)
            group.enter()
            database.writes.submit(
                heavy: true,
                { _ in
                    started.signal()
                    queued.wait()
                }, completion: { _ in group.leave() })
            started.wait()
            group.enter()
            let before = record("before")
            store.games.create(GameInput(name: "Before", imageName: "g")) { before((try? $0.get()) != nil) }
            // OR ROLLBACK: the unique id it breaks rolls back the whole transaction, not just the statement.
            group.enter()
            let rollback = record("rollback")
            database.submit(
                atomic: false, heavy: false,
                { db in
                    try db.execute("UPDATE OR ROLLBACK games SET id = ? WHERE id = ?", [first.id.rawValue, second.id.rawValue])
                }, completion: { rollback((try? $0.get()) != nil) })
            group.enter()
            let after = record("after")
            store.games.create(GameInput(name: "After", imageName: "g")) { after((try? $0.get()) != nil) }
            queued.signal()
            group.wait()
        }
        // Nothing the batch did is kept, and nothing after the rollback ran (and committed) alone.
        #expect(outcomes.withLock { $0 } == ["before": false, "rollback": false, "after": false])
        #expect(try store.games.count() == 2)
        // The writer goes on with the next batch.
        _ = try wait { store.games.create(GameInput(name: "Next", imageName: "g"), completion: $0) }
        #expect(try store.games.count() == 3)
    }

    @Test func atomicWritesAreAllOrNothingAndOthersInTheBatchSurvive() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let database = try #require(Mirror(reflecting: store).descendant("database") as? SQLiteDatabase)
        struct Abort: Error {}
        let insert = "INSERT INTO games (id, name, description, image_name, created_at, updated_at, version) VALUES (?, 'G', '', 'g', 0, 0, 1)"
        let group = DispatchGroup()
        let outcomes = Mutex<[String: Bool]>([:])
        for name in ["first", "atomic", "last"] {
            group.enter()
            database.writes.submit(
                atomic: name == "atomic",
                { db in
                    try db.execute(sql: insert, arguments: [CatalogID().rawValue])
                    if name == "atomic" {
                        try db.execute(sql: insert, arguments: [CatalogID().rawValue])
                        throw Abort()
                    }
                },
                completion: { result in
                    outcomes.withLock { $0[name] = (try? result.get()) != nil }
                    group.leave()
                })
        }
        group.wait()
        #expect(outcomes.withLock { $0 } == ["first": true, "atomic": false, "last": true])
        #expect(try store.games.count() == 2, "the failed atomic write left none of its two rows")
    }
}

/// Reads under a work budget, and searches that no single letter can blow up.
@Suite struct ReadBudgetTests {
    @Test func aReadOverItsBudgetIsInterrupted() async throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let search = ListRequest(limit: 20, order: .relevance, search: "sample")
        try await onThread { () throws -> Void in
            let group = DispatchGroup()
            for index in 0..<500 {
                group.enter()
                store.games.create(GameInput(name: "Sample game \(index)", description: "A sample of \(index)", imageName: "g")) { _ in group.leave() }
            }
            group.wait()
            // An ample allowance (not the event loops' 100 ms: tests run in parallel on a
            // loaded machine) reads the page.
            ReadBudget.allow(.seconds(5))
            #expect(try store.games.renderedList(search).nextCursor != nil)
            // A thread given almost nothing is interrupted, and the connection serves the next read.
            ReadBudget.allow(.nanoseconds(1))
            #expect(throws: StoreError.tooExpensive) { try store.games.renderedList(search) }
            ReadBudget.allow(.seconds(5))
            #expect(try store.games.renderedList(search).nextCursor != nil)
        }
    }

    /// The budget counts the work a read does, not the time its thread spends waiting (for the
    /// disk, or for a core on a loaded machine), up to ten allowances of wall-clock time.
    @Test func aReadThatWaitsIsBoundedByTenAllowancesOfWallClock() async throws {
        try await onThread { () throws -> Void in
            let queue = try DatabaseQueue()
            // pause(row, ms): sleeps `ms` at row 2,000, after the budget's first checks.
            let pause = DatabaseFunction("pause", argumentCount: 2, pure: false) { values in
                if Int64.fromDatabaseValue(values[0]) == 2_000, let milliseconds = Int64.fromDatabaseValue(values[1]) {
                    usleep(useconds_t(milliseconds * 1_000))
                }
                return 0
            }
            let sql = """
                WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 4000)
                SELECT sum(pause(x, ?)) FROM n
                """
            let previous = ReadBudget.allowance
            defer { ReadBudget.allow(previous) }
            ReadBudget.allow(.milliseconds(100))
            try queue.inDatabase { (db: Database) throws -> Void in
                db.add(function: pause)
                ReadBudget.install(on: db)
                // Three allowances spent asleep, next to no CPU time: the read finishes.
                #expect(try ReadBudget.run { try Int.fetchOne(db, sql: sql, arguments: [300]) } == 0)
                // Twelve allowances asleep: interrupted by the wall clock.
                let error = #expect(throws: DatabaseError.self) { try ReadBudget.run { try Int.fetchOne(db, sql: sql, arguments: [1_200]) } }
                #expect(error?.resultCode == .SQLITE_INTERRUPT)
                // The budget ended with the read: the next one runs in full.
                #expect(try ReadBudget.run { try Int.fetchOne(db, sql: sql, arguments: [0]) } == 0)
            }
        }
    }

    @Test func searchWordsOfOneLetterMatchWhole() {
        #expect(SearchQuery.fts5("a big ba") == #""a" "big"* "ba"*"#)
        #expect(SearchQuery.words("one, two;three") == ["one", "two", "three"])
        #expect(SearchQuery.fts5("a b c d e f g h i j") == #""a" "b" "c" "d" "e" "f" "g" "h""#)
        #expect(SearchQuery.fts5("--") == nil)
        #expect(SearchQuery.tsquery("a Big ba") == "a & big:* & ba:*")
        #expect(SearchQuery.tsquery("ab'cd:*|!e") == "ab:* & cd:* & e", "no tsquery syntax from the text")
        #expect(SearchQuery.tsquery("--") == nil)
    }

    /// ASCII text is split by its bytes, other text by its characters: the same words either way.
    @Test func searchWordsOfASCIITextAreTheWordsOfItsCharacters() {
        func byCharacters(_ text: String) -> [String] {
            text.split { !($0.isLetter || $0.isNumber) }.map(String.init)
        }
        let ascii = String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)
        for text in [ascii, ascii + ascii.reversed(), "  Star Wars: Episode IV (1977)!", "x", "", "__a1_B2__"] {
            #expect(SearchQuery.words(text) == byCharacters(text))
        }
        #expect(SearchQuery.words(ascii) == ["0123456789", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"])
        #expect(SearchQuery.words("Café crème, 北京²") == ["Café", "crème", "北京²"])
    }

    @Test func databaseURLsAndLibpqMessagesAreShownWithoutThePassword() {
        #expect(PostgresDatabase.redacted("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db")
        #expect(PostgresDatabase.redacted("postgresql://h/db?sslpassword=k&password=s3cret") == "postgresql://h/db?sslpassword=k&password=***")
        #expect(
            PostgresDatabase.redacted(#"invalid percent-encoded token: "Ab%zz""#, of: "postgresql://u:Ab%zz@h/db")
                == #"invalid percent-encoded token: "***""#)
    }
}

@Suite struct ChangeTokenTests {
    /// The bytes an event stream writes are the token's text, which reads back.
    @Test func tokensWrittenIntoBytesSpellWhatTheyRead() throws {
        for (seq, issued) in [(Int64(0), Int64(0)), (1, 1_795_262_400_000), (Int64.max, Int64.max), (1045, 7)] {
            let catalog = "5f0c2b7e9a1d4c3b8e6f1a2b3c4d5e6f"
            var bytes: [UInt8] = Array("x".utf8)
            ChangeToken.append(catalog: Array(catalog.utf8), seq: seq, issued: issued, to: &bytes)
            let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
            #expect(text == "c1." + Base64URL.encode(Array("\(catalog):\(seq):\(issued)".utf8)))
            #expect(ChangeToken(text) == ChangeToken(catalog: catalog, seq: seq, issued: issued))
            #expect(ChangeToken(catalog: catalog, seq: seq, issued: issued).encoded == text)
        }
    }
}
