import CatalogModels
import Foundation
import ServiceTestSupport
import Testing

@testable import CatalogStore

/// On PostgreSQL, the statements of a list page and of a change feed page are planned once
/// for all their arguments (a generic plan, after the five custom plans PostgreSQL makes
/// first), not again at every page: their bound `LIMIT ?` sits over a constant bound
/// (``SQLDialect/limited(_:order:atMost:)``). Counted in `pg_prepared_statements` of the
/// session that ran them.
@Suite struct PlanCacheTests {
    /// How PostgreSQL planned `sql` over eight executions with `arguments` on `connection`.
    private static func plans(_ connection: PostgresConnection, _ sql: String, _ arguments: SQLArguments) throws -> (generic: Int64, custom: Int64, rows: [[SQLValue]]) {
        var rows: [[SQLValue]] = []
        for _ in 0..<8 { rows = try connection.fetchRows(sql, arguments).map(\.values) }
        let counts = try connection.fetchRows(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = ?", [PostgresConnection.numbered(sql)])
        return (counts.first?[0].int64 ?? -1, counts.first?[1].int64 ?? -1, rows)
    }

    /// `sql` (``SQLDialect/limited(_:order:atMost:)``'s on PostgreSQL) limited by its bound
    /// limit alone, as it was.
    private static func unbounded(_ sql: String) -> String {
        let prefix = "SELECT * FROM ("
        guard sql.hasPrefix(prefix), let end = sql.range(of: ") limited ", options: .backwards),
            let limit = sql.range(of: " LIMIT ", options: .backwards, range: sql.startIndex..<end.lowerBound)
        else { return "" }
        return String(sql[sql.index(sql.startIndex, offsetBy: prefix.count)..<limit.lowerBound]) + " LIMIT ?"
    }

    /// Plans `sql` both ways on `connection`: bounded, it is planned once for all arguments
    /// after five custom plans; by its bound limit alone, at every execution (unless
    /// `unboundedToo`: some statements' costs do not grow with their limit). Both give the
    /// same rows, which are returned.
    private static func plannedOnce(
        _ connection: PostgresConnection, _ sql: String, _ arguments: SQLArguments, unboundedToo: Bool = false
    ) throws -> [[SQLValue]] {
        let bounded = try plans(connection, sql, arguments)
        #expect(bounded.generic == 3 && bounded.custom == 5, "\(bounded.generic) generic, \(bounded.custom) custom plans: \(sql)")
        let unbounded = try plans(connection, Self.unbounded(sql), arguments)
        #expect(unbounded.generic == (unboundedToo ? 3 : 0), "\(unbounded.generic) generic plans: \(sql)")
        #expect(bounded.rows == unbounded.rows)
        return bounded.rows
    }

    @Test(.enabled(if: TestEngine.postgresURL != nil)) func aListPageAndAFeedPageArePlannedOnce() async throws {
        try await TestEngine.run(.postgresql) {
            let catalog = try TestCatalog(seed: false)
            let first = try await catalog.api.playableItems.create(PlayableItemInput(title: "First", streamURL: URL(string: "https://example.com/first")!)).value.id
            guard case let .postgresql(url) = catalog.application.store.location else { throw StoreError.unavailable("not on PostgreSQL") }
            let connection = try PostgresConnection(url: url, settings: "")
            // Enough rows that a limit costed at a tenth of them costs more than a page.
            try connection.script(
                """
                INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                SELECT gen_random_uuid()::text, 'Item ' || (g % 7), '', 'https://example.com/' || g, g, g, 1 FROM generate_series(1, 5000) g;
                ANALYZE playable_items; ANALYZE changes
                """)
            let store = catalog.application.store
            for request in [ListRequest(limit: 20), ListRequest(limit: 100, order: .field("title", descending: true))] {
                let (sql, arguments) = try store.items.listQuery(request, after: nil)
                let rows = try Self.plannedOnce(connection, sql, arguments)
                #expect(rows.count == request.limit + 1)
            }
            // A page of the change feed, and one of an item's changes (two index lookups, which
            // were planned once already).
            let (feed, feedArguments) = store.changes.pageQuery(after: 3, filter: ChangeFilter(), viewer: nil, limit: 10)
            let changes = try Self.plannedOnce(connection, feed, feedArguments).compactMap { $0.first?.int64 }
            #expect(changes.count == 11 && changes.first ?? 0 > 3 && changes == changes.sorted())
            let (item, itemArguments) = store.changes.pageQuery(after: 0, filter: ChangeFilter(playableItemID: first), viewer: nil, limit: 10)
            let itemChanges = try Self.plannedOnce(connection, item, itemArguments, unboundedToo: true)
            #expect(itemChanges.count == 1 && itemChanges.first?[2] == .text(first.rawValue))
            try catalog.stop()
        }
    }
}
