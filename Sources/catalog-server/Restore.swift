import ArgumentParser
import CatalogService
import CatalogStore
import Foundation

/// `catalog-server restore --from FILE`: replaces the database with a backup, and puts the
/// images kept beside it back into the image folder; refuses while a server holds the
/// database.
struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Replace the database with a backup (the server must be stopped).")

    @Option(help: "The backup to restore.")
    var from: String

    @Option(help: ServerSettings.mediaDirectory.help) var mediaDirectory: String?

    @OptionGroup var storage: StorageOptions

    func run() throws {
        let (path, media) = try Settings.resolving { settings throws(SettingError) in
            let path = try storage.database(settings)
            return (path, try ServerSettings.mediaDirectory.read(settings, mediaDirectory) ?? CatalogApplication.defaultMediaDirectory(databasePath: path))
        }
        guard DatabaseLocation(path).engine == .sqlite else { Settings.fail("a PostgreSQL database is restored with pg_restore or psql") }
        guard FileManager.default.fileExists(atPath: from) else { Settings.fail("\(from) does not exist") }
        do {
            try CatalogStore.restore(from: from, to: path)
        } catch let error as StoreError {
            Settings.fail("cannot restore: \(error)")
        }
        do {
            if let count = try CatalogApplication.restoreImages(from: from, to: media) { say("restored \(count) images into \(media)") }
            if let count = try CatalogApplication.restoreVideos(from: from, to: media) { say("restored \(count) videos into \(media)") }
        } catch {
            Settings.fail("the database is restored, but its images and videos could not be: \(error)")
        }
        say("restored \(path) from \(from)")
    }
}
