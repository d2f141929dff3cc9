import CatalogModels
import Foundation
import ServiceTestSupport
import Testing

@testable import CatalogStore

/// On PostgreSQL, the statements of a list page and of a change feed page are planned once
/// for all their arguments (a generic plan, after the five custom plans PostgreSQL makes
/// first), not again at every page: their bound `LIMIT ?` sits over a constant bound
/// (``SQLDialect/limited(_:order:atMost:)``). Counted in `pg_prepared_statements` of the
/// session that ran them; the plan kept reads the page's index in order, with no sort.
@Suite struct PlanCacheTests {
    /// Runs `sql` eight times with `arguments` on `connection`, then checks the plan
    /// PostgreSQL kept: generic after five custom ones, an index scan in the page's order
    /// without a sort. Returns the rows, which are those of `sql` limited by its bound
    /// limit alone (as it was).
    private static func plannedOnce(_ connection: PostgresConnection, _ sql: String, _ arguments: SQLArguments) throws -> [[SQLValue]] {
        var rows: [[SQLValue]] = []
        for _ in 0..<8 { rows = try connection.fetchRows(sql, arguments).map(\.values) }
        let statement = try connection.fetchRows(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = ?", [PostgresConnection.numbered(sql)]
        ).first
        #expect(statement?[1].int64 == 3 && statement?[2].int64 == 5, "\(String(describing: statement)): \(sql)")
        // The plan kept (the arguments written out: integers and ids).
        let literals = arguments.map { argument -> String in
            switch argument.sqlValue {
            case let .integer(number): "\(number)"
            case let .text(text): "'\(text)'"
            default: "NULL"
            }
        }
        let plan = try connection.fetchRows("EXPLAIN EXECUTE \(statement?[0].string ?? "none")(\(literals.joined(separator: ", ")))")
            .compactMap { $0[0].string }.joined(separator: "\n")
        #expect(plan.contains("Index Scan") && !plan.contains("Sort") && !plan.contains("Seq Scan"), "\(plan)")
        // The same rows as the statement limited by its bound limit alone.
        let prefix = "SELECT * FROM ("
        if sql.hasPrefix(prefix), let end = sql.range(of: ") limited ", options: .backwards),
            let limit = sql.range(of: " LIMIT ", options: .backwards, range: sql.startIndex..<end.lowerBound)
        {
            let unbounded = String(sql[sql.index(sql.startIndex, offsetBy: prefix.count)..<limit.lowerBound]) + " LIMIT ?"
            #expect(try connection.fetchRows(unbounded, arguments).map(\.values) == rows)
        } else {
            Issue.record("not a bounded statement: \(sql)")
        }
        return rows
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aListPageAndAFeedPageArePlannedOnce() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            defer { try? catalog.stop() }
            _ = try await catalog.api.playableItems.create(PlayableItemInput(title: "First", streamURL: URL(string: "https://example.com/first")!))
            guard case let .postgresql(url) = catalog.application.store.location else { throw StoreError.unavailable("not on PostgreSQL") }
            let connection = try PostgresConnection(url: url, settings: "")
            // Enough rows that a limit estimated as a tenth of them costs more than a page.
            try connection.script(
                """
                INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                SELECT gen_random_uuid()::text, 'Item ' || (g % 7), '', 'https://example.com/' || g, g, g, 1 FROM generate_series(1, 5000) g;
                ANALYZE playable_items; ANALYZE changes
                """)
            let store = catalog.application.store
            for request in [ListRequest(limit: 20), ListRequest(limit: 100, order: .field("title", descending: true))] {
                let (first, firstArguments) = try store.items.listQuery(request, after: nil)
                let page = try Self.plannedOnce(connection, first, firstArguments)
                #expect(page.count == request.limit + 1)
                // The next page, after the first page's last row.
                let last = try #require(page.dropLast().last)
                let cursor = try #require(ListCursor.Key(last[last.count - 1]))
                let (next, nextArguments) = try store.items.listQuery(request, after: ListCursor(fingerprint: "", key: cursor, id: last[3].string ?? ""))
                let nextPage = try Self.plannedOnce(connection, next, nextArguments)
                #expect(nextPage.count == request.limit + 1 && nextPage.first?[3] == page.last?[3])
            }
            // A page of the whole change feed, as anyone and as a user.
            let (feed, feedArguments) = store.changes.pageQuery(after: 3, filter: ChangeFilter(), viewer: nil, limit: 10)
            let changes = try Self.plannedOnce(connection, feed, feedArguments).compactMap { $0.first?.int64 }
            #expect(changes.count == 11 && changes.first ?? 0 > 3 && changes == changes.sorted())
            let (mine, mineArguments) = store.changes.pageQuery(after: 0, filter: ChangeFilter(), viewer: .user(CatalogID()), limit: 1000)
            #expect(try Self.plannedOnce(connection, mine, mineArguments).count == 1001)
            // A feed of some types, or of an item, keeps its plans by their values.
            let (games, _) = store.changes.pageQuery(after: 0, filter: ChangeFilter(types: ["game"]), viewer: nil, limit: 10)
            #expect(games.hasSuffix(" ORDER BY seq LIMIT ?") && !games.hasPrefix("SELECT * FROM ("))
        }
    }

    /// A list page read unless unchanged (``SQLDialect/unlessUnchanged(_:)``): the page's
    /// rows, each with the statement's snapshot last; at that same snapshot (a repeatable
    /// read transaction), one row of nulls with it, PostgreSQL reading no row of the
    /// table; after a write elsewhere, the rows again with another snapshot. Planned once.
    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aPageUnlessUnchangedReadsNothingAtItsSnapshot() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            defer { try? catalog.stop() }
            for index in 0..<5 {
                _ = try await catalog.api.playableItems.create(PlayableItemInput(title: "Item \(index)", streamURL: URL(string: "https://example.com/\(index)")!))
            }
            guard case let .postgresql(url) = catalog.application.store.location else { throw StoreError.unavailable("not on PostgreSQL") }
            let connection = try PostgresConnection(url: url, settings: "")
            let request = ListRequest(limit: 3)
            let (plain, arguments) = try catalog.application.store.items.listQuery(request, after: nil)
            let (sql, unchangedArguments) = try catalog.application.store.items.listQuery(
                request, after: nil, way: .index, search: nil, unlessUnchanged: true)
            #expect(unchangedArguments.count == arguments.count)
            let rows = try connection.fetchRows(plain, arguments).map(\.values)
            #expect(rows.count == 4)
            try connection.script("BEGIN ISOLATION LEVEL REPEATABLE READ")
            let read = try connection.fetchRows(sql, arguments + [""]).map(\.values)
            let snapshot = try #require(read.first?.last?.string)
            #expect(read.map { Array($0.dropLast()) } == rows && read.allSatisfy { $0.last?.string == snapshot })
            #expect(snapshot.split(separator: " ").count == 2 && snapshot.split(separator: ":").count == 3, "\(snapshot)")
            for _ in 0..<8 {
                let unchanged = try connection.fetchRows(sql, arguments + [snapshot]).map(\.values)
                #expect(unchanged.count == 1 && unchanged.first?.dropLast().allSatisfy { $0 == .null } == true && unchanged.first?.last?.string == snapshot)
            }
            let statement = try #require(
                try connection.fetchRows("SELECT name, generic_plans FROM pg_prepared_statements WHERE statement = ?", [PostgresConnection.numbered(sql)]).first)
            #expect(statement[1].int64 ?? 0 >= 3, "planned once: \(statement)")
            let plan = try connection.fetchRows(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE \(statement[0].string ?? "none")(\(request.limit + 1), '\(snapshot)')"
            ).compactMap { $0[0].string }.joined(separator: "\n")
            #expect(plan.contains("One-Time Filter") && plan.contains("(never executed)") && !plan.contains("Sort"), "\(plan)")
            try connection.script("COMMIT")
            // A write elsewhere: the rows again, at another snapshot.
            try PostgresAdmin.run("UPDATE playable_items SET title = 'Changed' WHERE title = 'Item 0'", at: url)
            let after = try connection.fetchRows(sql, arguments + [snapshot]).map(\.values)
            #expect(after.count == 4 && after.first?.last?.string != snapshot)
        }
    }
}
