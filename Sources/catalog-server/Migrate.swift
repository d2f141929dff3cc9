import ArgumentParser
import CatalogStore

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending migrations without serving.")

    @OptionGroup var storage: StorageOptions

    func run() throws {
        let (path, directory) = try Settings.resolving { settings throws(SettingError) in
            (try storage.database(settings), try storage.migrationsDirectory(settings))
        }
        do {
            let store = try StorageOptions.open(path, migrations: directory)
            say(store.appliedMigrations.isEmpty ? "the schema is up to date" : store.appliedMigrations.map { "applied migration \($0)" }.joined(separator: "\n"))
            try store.close()
        } catch let error as MigrationError {
            Settings.fail("\(error)")
        }
    }
}
