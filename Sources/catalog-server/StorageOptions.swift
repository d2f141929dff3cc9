import ArgumentParser
import CatalogStore
import Foundation

/// Where the database and its migrations are.
struct StorageOptions: ParsableArguments {
    @Option(help: ServerSettings.database.help) var database: String?
    @Option(help: ServerSettings.migrations.help) var migrations: String?

    func database(_ settings: Settings) throws(SettingError) -> String {
        try ServerSettings.database.read(settings, database)
    }

    func migrationsDirectory(_ settings: Settings) throws(SettingError) -> URL? {
        try ServerSettings.migrations.read(settings, migrations).map { URL(fileURLWithPath: $0) }
    }

    /// Opens the database `database` names (a file or a `postgresql://` URL), applying
    /// its engine's migrations from `directory` (or those the binary carries).
    static func open(_ database: String, migrations directory: URL?) throws -> CatalogStore {
        let location = DatabaseLocation(database)
        return try CatalogStore(location, migrations: Migration.load(from: directory, for: location.engine))
    }
}
