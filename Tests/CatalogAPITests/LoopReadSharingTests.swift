import CatalogModels
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import CatalogStore

/// Reads that a loop sends together share one statement (``LoopReadSharing``): reads by key
/// each get the rows of their own key, and a failure of their statement is none of theirs
/// alone; identical reads each get all the rows, or the failure. Sent from a loop of the
/// test's own (``TestReactor``) to a real PostgreSQL.
@Suite struct LoopReadSharingTests {
    /// A read's own statement, and the one its kind shares: `10 / v` fails for ``boom``'s row.
    static let single = "SELECT k, 10 / v FROM keyed WHERE k = ?"
    static let shared = "SELECT k, 10 / v FROM keyed WHERE k = ANY (ARRAY(SELECT json_array_elements_text(CAST(? AS json))))"

    /// What a read got: its rows (`key=value`), its failure's SQLSTATE, or a request to run elsewhere.
    enum Got: Equatable, Sendable {
        case rows([String])
        case failed(String)
        case elsewhere
    }

    /// A read of `key`: by key (sharing with the batch's other reads by key), identical
    /// (sharing with the batch's reads of the same key so), or alone.
    struct Read: Sendable {
        enum Way: Sendable { case byKey, identical, alone }
        let key: CatalogID
        var way = Way.byKey
        /// What it binds, when not its key.
        var argument: String?
        /// A heavy read's caller (`nil`: a quick read).
        var caller: String?
    }

    /// The keys of the rows (`v` 1, 2 and 5), one without a row, and the row whose `10 / v` fails.
    static let (a, b, c, nowhere, boom) = (CatalogID(), CatalogID(), CatalogID(), CatalogID(), CatalogID())

    /// What reading `key` gives `value`.
    static func row(_ key: CatalogID, _ value: Int) -> Got { .rows(["\(key)=\(value)"]) }

    @Test(.enabled(if: TestEngine.postgresURL != nil, "needs PostgreSQL"))
    func readsSentTogetherShareOneStatementAsTheirWayAllows() async throws {
        try await GroupCommitTests.withCatalogStore(.postgresql) { store, _ in
            let database = store.database
            let (a, b, c, nowhere, boom) = (Self.a, Self.b, Self.c, Self.nowhere, Self.boom)
            _ = try database.write { db in
                try db.execute("CREATE TABLE keyed (k text PRIMARY KEY, v integer NOT NULL)", [])
                try db.execute(
                    "INSERT INTO keyed VALUES (?, 1), (?, 2), (?, 5), (?, 0)", [Self.a.rawValue, Self.b.rawValue, Self.c.rawValue, Self.boom.rawValue])
            }
            let reactor = try TestReactor()
            defer { reactor.stop() }
            // Until the loop has a connection (a read is declined while it connects).
            var first: [Got] = []
            for _ in 0..<200 where first != [Self.row(a, 10)] {
                first = try await Self.send([Read(key: a)], database, reactor)
                if first != [Self.row(a, 10)] { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(first == [Self.row(a, 10)])
            #expect(store.loopReads.shared == 0, "a read alone in its batch runs its own statement")

            // Taken together: one statement for the reads by key (a key twice, one that is
            // nowhere), another for a read that does not share.
            var before = store.loopReads
            let together = [Read(key: a), Read(key: b), Read(key: c, way: .alone), Read(key: a), Read(key: nowhere), Read(key: c)]
            #expect(
                try await Self.send(together, database, reactor) == [
                    Self.row(a, 10), Self.row(b, 5), Self.row(c, 2), Self.row(a, 10), .rows([]), Self.row(c, 2),
                ])
            var after = store.loopReads
            #expect(after.batches == before.batches + 1 && after.sent == before.sent + 6 && after.shared == before.shared + 5, "\(after)")

            // The shared statement fails (a division by zero in `boom`'s row): none of its reads
            // is answered with that failure. They are sent again once, each in a statement of
            // its own: `a` is answered, `boom` meets its own failure, and `b`, which PostgreSQL
            // then skipped, runs elsewhere.
            before = after
            #expect(try await Self.send([Read(key: a), Read(key: boom), Read(key: b)], database, reactor) == [Self.row(a, 10), .failed("22012"), .elsewhere])
            after = store.loopReads
            #expect(after.resent == before.resent + 3 && after.handedBack == before.handedBack + 1 && after.shared == before.shared, "\(after)")

            // Alone in its statement, a read meets its own failure.
            #expect(try await Self.send([Read(key: boom)], database, reactor) == [.failed("22012")])
            // And the connection goes on serving.
            #expect(try await Self.send([Read(key: b), Read(key: c)], database, reactor) == [Self.row(b, 5), Self.row(c, 2)])

            // Identical reads: one statement for each set of the same statement and arguments,
            // each read seeing all its rows (a read by key of the same key is not identical).
            before = store.loopReads
            let identical = [
                Read(key: a, way: .identical), Read(key: b, way: .identical), Read(key: a, way: .identical), Read(key: a, way: .alone),
                Read(key: nowhere, way: .identical), Read(key: b, way: .identical), Read(key: nowhere, way: .identical),
            ]
            #expect(
                try await Self.send(identical, database, reactor) == [
                    Self.row(a, 10), Self.row(b, 5), Self.row(a, 10), Self.row(a, 10), .rows([]), Self.row(b, 5), .rows([]),
                ])
            after = store.loopReads
            #expect(after.batches == before.batches + 1 && after.sent == before.sent + 7 && after.shared == before.shared + 6, "\(after)")
            // Their statement's failure is each one's own.
            before = after
            #expect(
                try await Self.send([Read(key: boom, way: .identical), Read(key: boom, way: .identical)], database, reactor) == [
                    .failed("22012"), .failed("22012"),
                ])
            after = store.loopReads
            #expect(after.resent == before.resent && after.handedBack == before.handedBack && after.shared == before.shared + 2, "\(after)")
            // Texts equal in Swift but not byte for byte are not identical: PostgreSQL compares bytes.
            before = after
            let composed = [Read(key: a, way: .identical, argument: "caf\u{e9}"), Read(key: a, way: .identical, argument: "cafe\u{301}")]
            #expect(try await Self.send(composed, database, reactor) == [.rows([]), .rows([])])
            after = store.loopReads
            #expect(after.sent == before.sent + 2 && after.shared == before.shared, "\(after)")
        }
    }

    /// Heavy reads (searches) leave apart from quick ones, each statement with a `Sync` of
    /// its own: one that fails costs the reads after it in its batch nothing (a quick
    /// batch's would be skipped). A caller holds at most eight places of a loop's heavy lane
    /// (of its line of 16): its others go elsewhere, while another caller's are taken.
    @Test(.enabled(if: TestEngine.postgresURL != nil, "needs PostgreSQL"))
    func heavyReadsFailAloneAndACallerHoldsItsShare() async throws {
        try await GroupCommitTests.withCatalogStore(.postgresql) { store, _ in
            let database = store.database
            let (a, b, c, boom) = (Self.a, Self.b, Self.c, Self.boom)
            _ = try database.write { db in
                try db.execute("CREATE TABLE keyed (k text PRIMARY KEY, v integer NOT NULL)", [])
                try db.execute("INSERT INTO keyed VALUES (?, 1), (?, 2), (?, 5), (?, 0)", [a.rawValue, b.rawValue, c.rawValue, boom.rawValue])
            }
            let reactor = try TestReactor()
            defer { reactor.stop() }
            // Until the lane has a connection (a read is declined while it connects).
            var first: [Got] = []
            for _ in 0..<200 where first != [Self.row(a, 10)] {
                first = try await Self.send([Read(key: a, way: .alone, caller: "x")], database, reactor)
                if first != [Self.row(a, 10)] { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(first == [Self.row(a, 10)])
            var before = store.loopReads
            let failing = [Read(key: a, way: .alone, caller: "x"), Read(key: boom, way: .alone, caller: "x"), Read(key: b, way: .alone, caller: "x")]
            #expect(try await Self.send(failing, database, reactor) == [Self.row(a, 10), .failed("22012"), Self.row(b, 5)])
            var after = store.loopReads
            #expect(after.heavy.taken == before.heavy.taken + 3 && after.batches == before.batches + 1 && after.resent == before.resent, "\(after)")
            #expect(after.handedBack == before.handedBack && after.heavy.declined == before.heavy.declined, "\(after)")
            // Ten of one caller's and two of another's in one turn: the first eight of the one
            // (what the lane's two connections take at once), and both of the other, are taken
            // (answered, or handed back if PostgreSQL keeps silent for 2 ms on a loaded machine).
            before = after
            let share = PostgresLoopReader.connections(loops: 1, lane: .heavy) * PostgresLoopReader.heavyBatch
            #expect(share == 8)
            let crowd = (0..<10).map { _ in Read(key: c, way: .alone, caller: "x") } + (0..<2).map { _ in Read(key: b, way: .alone, caller: "y") }
            let got = try await Self.send(crowd, database, reactor)
            let answered = got.prefix(8).allSatisfy { $0 == Self.row(c, 2) || $0 == .elsewhere } && got.suffix(2).allSatisfy { $0 == Self.row(b, 5) || $0 == .elsewhere }
            #expect(answered && got[8] == .elsewhere && got[9] == .elsewhere, "\(got)")
            after = store.loopReads
            #expect(after.heavy.taken == before.heavy.taken + 10 && after.heavy.declined == before.heavy.declined + 2, "\(after)")
            // Their places are free again once answered.
            #expect(try await Self.send((0..<4).map { _ in Read(key: a, way: .alone, caller: "x") }, database, reactor) == Array(repeating: Self.row(a, 10), count: 4))
        }
    }

    /// Sends `reads` from the loop in one turn (so they leave in one batch) and waits for
    /// their outcomes, in order; a read the loop declines is `elsewhere`.
    static func send(_ reads: [Read], _ database: any SQLDatabase, _ reactor: TestReactor) async throws -> [Got] {
        let outcomes = Mutex<[Int: Got]>([:])
        let sendable = SendableDatabase(database: database)
        await reactor.run {
            for (index, read) in reads.enumerated() {
                let sharing: LoopReadSharing? =
                    switch read.way {
                    case .byKey: .byKey(sql: shared, key: read.key, column: 0)
                    case .identical: .identical
                    case .alone: nil
                    }
                let taken = sendable.database.readOnLoop(
                    reactor, single, [read.argument ?? read.key.rawValue], sharing: sharing, heavyCaller: read.caller, isAbandoned: { false },
                    { rows in
                        var got: [String] = []
                        while try rows.step() { got.append("\(String(decoding: rows.text(0), as: UTF8.self))=\(rows.integer(1))") }
                        return got
                    }
                ) { outcome in
                    let got: Got =
                        switch outcome {
                        case let .success(rows): .rows(rows)
                        case let .failure(error): .failed((error as? SQLError)?.code ?? "\(error)")
                        case nil: .elsewhere
                        }
                    outcomes.withLock { $0[index] = got }
                }
                if !taken { outcomes.withLock { $0[index] = .elsewhere } }
            }
        }
        for _ in 0..<500 where outcomes.withLock({ $0.count }) < reads.count { try await Task.sleep(for: .milliseconds(10)) }
        return outcomes.withLock { outcomes in reads.indices.map { outcomes[$0] ?? .failed("unanswered") } }
    }

    /// The store's database, handed to the loop's thread (used there only).
    struct SendableDatabase: @unchecked Sendable {
        let database: any SQLDatabase
    }
}
