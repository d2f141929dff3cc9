import CatalogSchema
import Foundation
import ServiceTestSupport
import Testing

@testable import CatalogStore

/// The declarations and the migrations describe the same tables: every declared column,
/// the index of each sort order, the search index, the geographic index and the change
/// log's triggers exist in both engines' migrated schemas (SQLite always; PostgreSQL when
/// `CATALOG_TEST_POSTGRES_URL` names a server), so a field or resource added to one and
/// not the other fails here, not in production.
@Suite struct MigratedSchemaTests {
    /// What a migrated database holds, by name.
    struct Catalog {
        var columns: [String: Set<String>] = [:]
        var indexes: Set<String> = []
        var triggers: Set<String> = []
        var tables: Set<String> = []
    }

    static func sqlite() throws -> Catalog {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try CatalogStore(
            .file(directory.appendingPathComponent("catalog.sqlite").path),
            migrations: Migration.load(from: migrationsDirectory, for: .sqlite))
        defer { try? store.close() }
        return try store.database.read { db in
            var catalog = Catalog()
            for row in try db.fetchRows("SELECT type, name FROM sqlite_master") {
                guard let type = row[0].string, let name = row[1].string else { continue }
                switch type {
                case "table": catalog.tables.insert(name)
                case "index": catalog.indexes.insert(name)
                case "trigger": catalog.triggers.insert(name)
                default: break
                }
            }
            for table in catalog.tables {
                catalog.columns[table] = Set(try db.fetchRows("SELECT name FROM pragma_table_info(?)", [table]).compactMap { $0[0].string })
            }
            return catalog
        }
    }

    static func postgresql() throws -> Catalog {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        let database = try TestEngine.postgresDatabase(for: directory)
        defer { TestEngine.release(directory) }
        let store = try CatalogStore(.postgresql(database), migrations: Migration.load(from: migrationsDirectory, for: .postgresql))
        defer { try? store.close() }
        return try store.database.read { db in
            var catalog = Catalog()
            for row in try db.fetchRows("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'") {
                guard let table = row[0].string, let column = row[1].string else { continue }
                catalog.tables.insert(table)
                catalog.columns[table, default: []].insert(column)
            }
            catalog.indexes = Set(try db.fetchRows("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'").compactMap { $0[0].string })
            catalog.triggers = Set(try db.fetchRows("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal").compactMap { $0[0].string })
            return catalog
        }
    }

    static let resources: [ResourceSchema] = ResourceSchema.all + [.user, .apiKey]

    @Test(arguments: ["sqlite", "postgresql"])
    func everyDeclaredColumnIndexAndTriggerIsMigrated(_ engine: String) throws {
        let catalog: Catalog
        if engine == "postgresql" {
            guard TestEngine.postgresURL != nil else { return }  // no server named: SQLite only
            catalog = try Self.postgresql()
        } else {
            catalog = try Self.sqlite()
        }
        for schema in Self.resources {
            let columns = try #require(catalog.columns[schema.table], "\(engine): no table \(schema.table)")
            for field in schema.members {
                guard case let .column(column) = field.storage else { continue }
                #expect(columns.contains(column), "\(engine): \(schema.table).\(column) (\(field.name)) is declared, not migrated")
            }
            // Each sort order walks an index of its own: (column, id). Comments are listed
            // only within an item or a thread, by the indexes of those scopes.
            let byCreated = schema === ResourceSchema.comment ? ["comments_by_item", "comments_by_parent"] : ["\(schema.table)_by_created"]
            for index in byCreated { #expect(catalog.indexes.contains(index), "\(engine): \(index)") }
            for field in schema.members where field.sortable {
                let column = try #require(field.column)
                #expect(catalog.indexes.contains("\(schema.table)_by_\(column)"), "\(engine): \(schema.table)_by_\(column), for sort=\(field.name)")
            }
            if let searchTable = schema.searchTable {
                // SQLite: an FTS5 table; PostgreSQL: a GIN index over the row's search vector.
                let found = engine == "sqlite" ? catalog.tables.contains(searchTable) : catalog.indexes.contains("\(schema.table)_search")
                #expect(found, "\(engine): the search index of \(schema.table)")
                if engine == "postgresql" { #expect(columns.contains("search_vector"), "\(engine): \(schema.table).search_vector") }
            }
            if schema.geographic {
                let found = engine == "sqlite" ? catalog.tables.contains("\(schema.table)_rtree") : catalog.indexes.contains("\(schema.table)_by_point")
                #expect(found, "\(engine): the geographic index of \(schema.table)")
            }
        }
        // Every resource of the change feed is logged by triggers on its table.
        for schema in ResourceSchema.all {
            let triggers = engine == "sqlite" ? ["insert", "update", "delete"].map { "\(schema.table)_changes_\($0)" } : ["\(schema.table)_changes"]
            for trigger in triggers { #expect(catalog.triggers.contains(trigger), "\(engine): trigger \(trigger)") }
        }
        #expect(catalog.tables.contains("changes") && catalog.indexes.contains("changes_by_subject"))
    }

    /// PostgreSQL's full-text indexes never hold more than 64 kB of new rows' entries
    /// unmerged, which every search reads whole (Migrations/postgresql/0014): after 2,000
    /// rows of some 25 words each (about 600 kB of entries, which the default 4 MB limit
    /// would leave pending), merging what is left frees at most 8 pages of 8 kB.
    @Test func searchIndexesKeepTheirPendingListsShortOnPostgreSQL() throws {
        guard TestEngine.postgresURL != nil else { return }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        let database = try TestEngine.postgresDatabase(for: directory)
        defer { TestEngine.release(directory) }
        let store = try CatalogStore(.postgresql(database), migrations: Migration.load(from: migrationsDirectory, for: .postgresql))
        defer { try? store.close() }
        let pending = try store.database.write { db in
            _ = try db.execute(
                """
                INSERT INTO playable_items (id, title, description, stream_url, created_at, updated_at, version)
                SELECT gen_random_uuid()::text, 'Pending title ' || i, repeat('word' || i || ' another' || (i % 97) || ' ', 12),
                       'https://videos.example.com/' || i || '.m3u8', 0, 0, 1
                FROM generate_series(1, 2000) AS i
                """, [])
            return try db.fetchValue("SELECT gin_clean_pending_list('playable_items_search')", []).int
        }
        let pages = try #require(pending)
        #expect(pages <= 8, "\(pages) pages were pending")
    }
}
