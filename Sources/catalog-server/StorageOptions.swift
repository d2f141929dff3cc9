import ArgumentParser
import CatalogStore
import Foundation

/// Where the database and its migrations are.
struct StorageOptions: ParsableArguments {
    @Option(help: """
        The SQLite database file (its folder is created if missing), or a postgresql:// URL, passed to libpq as it is \
        (sslmode, several hosts, target_session_attrs) [CATALOG_DATABASE, default ./data/catalog.sqlite].
        """)
    var database: String?

    @Option(help: """
        A folder of NNNN_description.sql migrations to run instead of those built in (PostgreSQL's in its postgresql folder) \
        [CATALOG_MIGRATIONS; default: the ones this build carries].
        """)
    var migrations: String?

    func database(_ settings: Settings) throws(SettingError) -> String {
        try settings.text(database, "CATALOG_DATABASE", default: "./data/catalog.sqlite")
    }

    func migrationsDirectory(_ settings: Settings) throws(SettingError) -> URL? {
        try settings.optionalText(migrations, "CATALOG_MIGRATIONS").map { URL(fileURLWithPath: $0) }
    }

    /// Opens the database `database` names (a file or a `postgresql://` URL), applying
    /// its engine's migrations from `directory` (or those the binary carries).
    static func open(_ database: String, migrations directory: URL?) throws -> CatalogStore {
        let location = DatabaseLocation(database)
        return try CatalogStore(location, migrations: Migration.load(from: directory, for: location.engine))
    }
}
