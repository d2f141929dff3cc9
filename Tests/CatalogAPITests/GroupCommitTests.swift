import CatalogModels
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import CatalogStore

/// The one group-commit loop (``GroupCommit``), on each engine: writes queued while the
/// writers are busy commit together, and a write that fails among them fails alone.
/// SQLite undoes the one failed statement and goes on; PostgreSQL aborts the whole
/// transaction, so the loop runs the batch again, each write alone. The outcome must be
/// the same.
@Suite struct GroupCommitTests {
    /// SQLite always; PostgreSQL when `CATALOG_TEST_POSTGRES_URL` names a server.
    static let engines: [DatabaseEngine] = TestEngine.postgresURL == nil ? [.sqlite] : [.sqlite, .postgresql]

    /// Submits a write that holds the writer (in `group`) until the semaphore returned is
    /// signalled, and returns once it runs: writes submitted meanwhile queue up. It reads
    /// first, so that its transaction has begun (on PostgreSQL, taken the change log's
    /// lock, which a writer sends on with its first statements).
    static func holdTheWriter(_ database: any SQLDatabase, _ group: DispatchGroup) -> DispatchSemaphore {
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        group.enter()
        database.submit(
            WriteOptions(), atomic: false, heavy: true,
            { db in
                _ = try? db.fetchValue("SELECT 1")
                held.signal()
                release.wait()
            }, completion: { _ in group.leave() })
        held.wait()
        return release
    }

    /// A write of ``batch(_:_:_:)``: its name, whether it is atomic, and its work.
    typealias NamedWrite = (name: String, atomic: Bool, work: @Sendable (any SQLConnection) throws -> Void)

    /// Submits `writes` while every writer is held, so that they are taken as one batch,
    /// and returns whether each (by name) was reported committed.
    static func batch(_ database: any SQLDatabase, _ engine: DatabaseEngine, _ writes: [NamedWrite]) async throws -> [String: Bool] {
        let outcomes = Mutex<[String: Bool]>([:])
        try await onThread { () throws -> Void in
            let group = DispatchGroup()
            let release = try holdTheWriters(database, engine, group)
            for write in writes {
                group.enter()
                database.submit(
                    WriteOptions(), atomic: write.atomic, heavy: false, write.work,
                    completion: { result in
                        outcomes.withLock { $0[write.name] = (try? result.get()) != nil }
                        group.leave()
                    })
            }
            release.signal()
            group.wait()
        }
        return outcomes.withLock { $0 }
    }

    /// The names of the games, in order.
    static func gameNames(_ database: any SQLDatabase) throws -> [String] {
        try database.read { db in try db.fetchRows("SELECT name FROM games").compactMap { $0[0].string } }.sorted()
    }

    /// The insert of a game's row (``SQLConnection/insertDeferred(_:_:)``): its id, name,
    /// description, image name, times and version.
    static let gameRow = RowInsert("games", ["id", "name", "description", "image_name", "created_at", "updated_at", "version"])

    /// Holds every writer of `engine` (in `group`) until the semaphore returned is
    /// signalled: PostgreSQL has a second writer, and a write taken by it waits for the
    /// change log's lock, which the first one's transaction holds.
    static func holdTheWriters(_ database: any SQLDatabase, _ engine: DatabaseEngine, _ group: DispatchGroup) throws -> DispatchSemaphore {
        let release = holdTheWriter(database, group)
        guard engine == .postgresql else { return release }
        group.enter()
        database.submit(WriteOptions(), atomic: false, heavy: false, { _ in }, completion: { _ in group.leave() })
        let deadline = Date().addingTimeInterval(10)
        while try database.read({ db in try db.fetchValue("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").int }) == 0 {
            guard Date() < deadline else {
                release.signal()
                throw StoreError.unavailable("the second writer never waited for the lock")
            }
            usleep(2_000)
        }
        return release
    }

    /// The INSERT of a game: its id, then its name.
    static let insertGame = "INSERT INTO games (id, name, description, image_name, created_at, updated_at, version) VALUES (?, ?, '', 'g', 0, 0, 1)"

    /// Runs `body` with the database of a store on a fresh database of `engine`, which
    /// holds one game, named "Existing", whose id it passes too.
    static func withStore(_ engine: DatabaseEngine, _ body: (any SQLDatabase, CatalogID) async throws -> Void) async throws {
        try await withCatalogStore(engine) { store, existing in try await body(store.database, existing) }
    }

    /// ``withStore(_:_:)``, passing the store itself.
    static func withCatalogStore(_ engine: DatabaseEngine, _ body: (CatalogStore, CatalogID) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("group-commit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let location: DatabaseLocation =
            switch engine {
            case .sqlite: .file(directory.appendingPathComponent("catalog.sqlite").path)
            case .postgresql: .postgresql(try TestEngine.postgresDatabase(for: directory))
            }
        defer { if engine == .postgresql { TestEngine.release(directory) } }
        let store = try CatalogStore(location, migrations: Migration.load(from: migrationsDirectory, for: engine))
        defer { try? store.close() }
        let existing = CatalogID()
        _ = try store.database.write { db in try db.execute(insertGame, [existing.rawValue, "Existing"]) }
        try await body(store, existing)
    }

    @Test(arguments: engines) func aWriteFailingInABatchFailsAloneAndTheOthersCommit(_ engine: DatabaseEngine) async throws {
        try await Self.withStore(engine) { database, existing in
            let insert = Self.insertGame
            let outcomes = Mutex<[String: Bool]>([:])
            try await onThread { () throws -> Void in
                let group = DispatchGroup()
                // Every writer is busy, so the three writes below queue up and are taken together.
                let release = try Self.holdTheWriters(database, engine, group)
                for (name, id) in [("before", CatalogID()), ("duplicate", existing), ("after", CatalogID())] {
                    group.enter()
                    // One statement each, not atomic: no savepoint of its own.
                    database.submit(
                        WriteOptions(), atomic: false, heavy: false, { db in try db.execute(insert, [id.rawValue, name]) },
                        completion: { result in
                            outcomes.withLock { $0[name] = (try? result.get()) != nil }
                            group.leave()
                        })
                }
                release.signal()
                group.wait()
            }
            #expect(outcomes.withLock { $0 } == ["before": true, "duplicate": false, "after": true])
            let names = try database.read { db in try db.fetchRows("SELECT name FROM games").compactMap { $0[0].string } }
            #expect(Set(names).intersection(["before", "after", "Existing", "duplicate"]) == ["Existing", "after", "before"])
        }
    }

    /// Deferred statements (``SQLConnection/executeDeferred(_:_:)`` and
    /// ``SQLConnection/insertDeferred(_:_:)``: on PostgreSQL sent on without waiting, rows
    /// of one insert in one statement, their results read at the next statement that
    /// returns rows, the next savepoint, or the commit) have the same outcomes. A failure
    /// surfacing in a later write, or at the commit, still fails only its own write: the
    /// batch runs again, each write alone. One surfacing at an atomic write's release
    /// undoes that write only.
    @Test(arguments: engines) func deferredWritesFailingInABatchFailAloneAndTheOthersCommit(_ engine: DatabaseEngine) async throws {
        try await Self.withStore(engine) { database, existing in
            let insert = Self.insertGame
            // Each write: its name, whether it is atomic, and the games it inserts (name and
            // id). Atomic writes execute their inserts; the others insert rows, which gather.
            let writes: [(String, Bool, [(String, CatalogID)])] = [
                ("before", false, [("before", CatalogID())]),
                // In one statement with "before"; it fails at the next write's savepoint, so
                // the batch runs again, each write alone.
                ("duplicate", false, [("duplicate", existing)]),
                ("atomic", true, [("atomic", CatalogID()), ("atomic-2", CatalogID())]),
                // Fails at its own release: its first game is undone with it.
                ("atomicDuplicate", true, [("partial", CatalogID()), ("duplicate-2", existing)]),
                ("reads", false, [("reads", CatalogID())]),
                ("after", false, [("after", CatalogID())]),
                ("after-2", false, [("after-2", CatalogID())]),
                // In one statement with the two before it; its failure surfaces only at the commit.
                ("last", false, [("last", existing)]),
            ]
            let counted = Mutex<Int?>(nil)
            let outcomes = try await Self.batch(
                database, engine,
                writes.map { name, atomic, games in
                    (
                        name, atomic,
                        { db in
                            for (game, id) in games {
                                if atomic {
                                    try db.executeDeferred(insert, [id.rawValue, game])
                                } else {
                                    try db.insertDeferred(Self.gameRow, [id.rawValue, game, "", "g", 0, 0, 1])
                                }
                            }
                            // A read after a deferred write sees it.
                            if name == "reads" {
                                let count = try db.fetchValue("SELECT count(*) FROM games WHERE name = 'reads'").int
                                counted.withLock { $0 = count }
                            }
                        }
                    )
                })
            #expect(
                outcomes == [
                    "before": true, "duplicate": false, "atomic": true, "atomicDuplicate": false, "reads": true, "after": true, "after-2": true,
                    "last": false,
                ])
            #expect(counted.withLock { $0 } == 1)
            #expect(try Self.gameNames(database) == ["Existing", "after", "after-2", "atomic", "atomic-2", "before", "reads"])
        }
    }

    /// On PostgreSQL a failed statement leaves the transaction unable to go on, even when
    /// the write that ran it catches the failure, and PostgreSQL then answers its `COMMIT`
    /// with `ROLLBACK`: no write of the batch is reported committed for that. The batch
    /// runs again, each write alone; the others commit, and the one that caught the
    /// failure fails.
    @Test(.enabled(if: TestEngine.postgresURL != nil, "needs PostgreSQL"))
    func aWriteThatCatchesItsFailureOnPostgreSQLIsNeverReportedCommitted() async throws {
        try await Self.withStore(.postgresql) { database, existing in
            let insert = Self.insertGame
            // The last write catches its failure, so nothing after it in the transaction
            // fails: only the commit says that the transaction was rolled back.
            let outcomes = try await Self.batch(
                database, .postgresql,
                [
                    ("before", false, { db in try db.execute(insert, [CatalogID().rawValue, "before"]) }),
                    ("after", false, { db in try db.executeDeferred(insert, [CatalogID().rawValue, "after"]) }),
                    ("catches", false, { db in _ = try? db.execute(insert, [existing.rawValue, "duplicate"]) }),
                ])
            #expect(outcomes == ["before": true, "catches": false, "after": true])
            #expect(try Self.gameNames(database) == ["Existing", "after", "before"])
        }
    }

    /// A writer's connection lost while its batch is in flight (here a statement of the
    /// batch ends its own session, sent on with the others): no write of the batch is
    /// reported committed, none is kept, and the next write commits on a new connection.
    @Test(.enabled(if: TestEngine.postgresURL != nil, "needs PostgreSQL"))
    func aWriterConnectionLostMidBatchFailsItAndTheNextWriteReconnects() async throws {
        try await Self.withStore(.postgresql) { database, _ in
            let outcomes = try await Self.batch(
                database, .postgresql,
                [
                    ("before", false, { db in try db.insertDeferred(Self.gameRow, [CatalogID().rawValue, "before", "", "g", 0, 0, 1]) }),
                    ("ends", false, { db in try db.executeDeferred("SELECT pg_terminate_backend(pg_backend_pid())", []) }),
                    ("after", false, { db in try db.insertDeferred(Self.gameRow, [CatalogID().rawValue, "after", "", "g", 0, 0, 1]) }),
                ])
            #expect(outcomes == ["before": false, "ends": false, "after": false])
            // Both writers take the next writes: each commits, on a connection of its own.
            for name in ["next", "next-2"] {
                _ = try database.write { db in try db.execute(Self.insertGame, [CatalogID().rawValue, name]) }
            }
            #expect(try Self.gameNames(database) == ["Existing", "next", "next-2"])
        }
    }

    /// Creates taken together (on PostgreSQL, one statement of several rows) are each
    /// answered with what reading its row back renders, and commit in the order they were
    /// submitted: the change log lists them in that order, all in one transaction.
    @Test(arguments: engines) func createsTakenTogetherAnswerAsTheyReadBackInTheirOrder(_ engine: DatabaseEngine) async throws {
        try await Self.withCatalogStore(engine) { store, _ in
            let items = store.items
            #expect(items.boundInsert != nil)
            let texts = ["plain", "quote \" backslash \\ slash /", "é 😀 中文", "x", "", "ünïcödé ✓ end"]
            // 13 creates: statements of 8, 4 and 1 rows.
            let inputs = (0..<13).map { index in
                PlayableItemInput(
                    title: "Item \(index) " + texts[index % texts.count], description: texts[(index + 1) % texts.count],
                    streamURL: URL(string: "https://example.com/\(index)/a.m3u8?x=1&y=%20")!,
                    thumbnailURL: index % 2 == 0 ? URL(string: "https://example.com/p.jpg") : nil,
                    durationSeconds: [nil, 596, 146.5, 1e-7][index % 4])
            }
            let created = Mutex<[Int: RenderedResource]>([:])
            try await onThread { () throws -> Void in
                let group = DispatchGroup()
                let release = try Self.holdTheWriters(store.database, engine, group)
                for (index, input) in inputs.enumerated() {
                    group.enter()
                    items.create(input) { result in
                        if let resource = try? result.get() { created.withLock { $0[index] = resource } }
                        group.leave()
                    }
                }
                release.signal()
                group.wait()
            }
            let answers = created.withLock { $0 }
            #expect(answers.count == inputs.count)
            for index in inputs.indices {
                guard let answer = answers[index] else { continue }
                items.cache?.invalidate(id: answer.id.rawValue)
                let read = try #require(try items.rendered(answer.id))
                #expect(String(decoding: answer.json, as: UTF8.self) == String(decoding: read.json, as: UTF8.self))
                #expect(answer.version == 1 && read.version == 1)
            }
            let ids = inputs.indices.compactMap { answers[$0]?.id.rawValue }
            let logged = try store.database.read { db in
                try db.fetchColumn("SELECT id FROM changes WHERE type = 'playableItem' ORDER BY seq").compactMap(\.string)
            }
            #expect(logged == ids)
            if engine == .postgresql {
                let transactions = try store.database.read { db in
                    try db.fetchValue("SELECT count(DISTINCT xmin::text) FROM playable_items").int
                }
                #expect(transactions == 1)
            }
        }
    }

    /// A statement that rolls SQLite's whole transaction back (`OR ROLLBACK`, as a full disk
    /// or an I/O error may) fails every write of its batch, and nothing after it runs
    /// outside the transaction: a write taken later in the batch (atomic, in a savepoint of
    /// its own, or not) neither commits alone nor is reported done.
    @Test func aWriteThatRollsTheBatchBackFailsEveryWriteInItAndNoneCommits() async throws {
        try await Self.withStore(.sqlite) { database, existing in
            let insert = Self.insertGame
            let outcomes = Mutex<[String: Bool]>([:])
            try await onThread { () throws -> Void in
                let group = DispatchGroup()
                let release = Self.holdTheWriter(database, group)
                let writes: [(name: String, atomic: Bool, sql: String, id: CatalogID)] = [
                    ("before", false, insert, CatalogID()),
                    ("rollback", false, insert.replacingOccurrences(of: "INSERT INTO", with: "INSERT OR ROLLBACK INTO"), existing),
                    ("atomic after", true, insert, CatalogID()),
                    ("after", false, insert, CatalogID()),
                ]
                for write in writes {
                    group.enter()
                    database.submit(
                        WriteOptions(), atomic: write.atomic, heavy: false, { db in try db.execute(write.sql, [write.id.rawValue, write.name]) },
                        completion: { result in
                            outcomes.withLock { $0[write.name] = (try? result.get()) != nil }
                            group.leave()
                        })
                }
                release.signal()
                group.wait()
            }
            #expect(outcomes.withLock { $0 } == ["before": false, "rollback": false, "atomic after": false, "after": false])
            let names = try database.read { db in try db.fetchRows("SELECT name FROM games").compactMap { $0[0].string } }
            #expect(Set(names).intersection(["before", "rollback", "atomic after", "after", "Existing"]) == ["Existing"])
            // The writer goes on: the next write commits.
            _ = try database.write { db in try db.execute(insert, [CatalogID().rawValue, "next"]) }
            #expect(try database.read { db in try db.fetchValue("SELECT count(*) FROM games WHERE name = 'next'").int } == 1)
        }
    }

    /// A background write (the server's own bookkeeping) waits while a request's write
    /// waits, and runs once none does; both commit.
    @Test func aBackgroundWriteGoesAfterTheRequestsWritesWaiting() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("group-commit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try CatalogStore(.file(directory.appendingPathComponent("catalog.sqlite").path), migrations: Migration.load(from: migrationsDirectory, for: .sqlite))
        defer { try? store.close() }
        let database = store.database
        let order = Mutex<[String]>([])
        try await onThread { () throws -> Void in
            let group = DispatchGroup()
            let release = Self.holdTheWriter(database, group)
            for (name, options) in [("background", WriteOptions.inBackground), ("request", WriteOptions())] {
                group.enter()
                database.submit(
                    options, atomic: false, heavy: false,
                    { db in try db.execute("INSERT INTO catalog_metadata (key, value) VALUES (?, '1')", [name]) },
                    completion: { result in
                        if case .success = result { order.withLock { $0.append(name) } }
                        group.leave()
                    })
            }
            release.signal()
            group.wait()
        }
        #expect(order.withLock { $0 } == ["request", "background"])
    }
}
