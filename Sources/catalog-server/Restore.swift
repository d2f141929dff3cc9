import ArgumentParser
import CatalogStore
import Foundation

/// `catalog-server restore --from FILE`: replaces the database with a backup; refuses
/// while a server holds the database.
struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Replace the database with a backup (the server must be stopped).")

    @Option(help: "The backup to restore.")
    var from: String

    @OptionGroup var storage: StorageOptions

    func run() throws {
        let path = try Settings.resolving { settings throws(SettingError) in try storage.database(settings) }
        guard DatabaseLocation(path).engine == .sqlite else { Settings.fail("a PostgreSQL database is restored with pg_restore or psql") }
        guard FileManager.default.fileExists(atPath: from) else { Settings.fail("\(from) does not exist") }
        do {
            try CatalogStore.restore(from: from, to: path)
        } catch let error as StoreError {
            Settings.fail("cannot restore: \(error)")
        }
        say("restored \(path) from \(from)")
    }
}
