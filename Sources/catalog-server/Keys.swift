import ArgumentParser
import CatalogIdentity
import CatalogModels
import CatalogStore
import Foundation

/// `catalog-server keys create --role admin --name NAME`: how the first admin gets in.
/// Applies pending migrations, creates a user named NAME with the role and an API key
/// for it, and prints the key — alone, on one line of standard output. Works only while
/// no server holds the database.
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create users' API keys offline (the server must be stopped).",
        subcommands: [Create.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a user with ROLE and an API key for it; print the key on standard output.")

        @Option(help: "member, editor or admin.")
        var role: String

        @Option(help: "The user's display name, also the key's name.")
        var name: String

        @OptionGroup var storage: StorageOptions

        func run() throws {
            guard let role = Role(rawValue: role) else { Settings.fail("--role must be one of member, editor, admin, not '\(self.role)'") }
            let (path, directory) = try Settings.resolving { settings throws(SettingError) in
                (try storage.database(settings), try storage.migrationsDirectory(settings))
            }
            do {
                let store = try StorageOptions.open(path, migrations: directory)
                defer { try? store.close() }
                let secret = try APIKeySecret()
                let created = try store.accounts.bootstrap(name: name, role: role, keyName: name, digest: secret.digest, prefix: secret.displayed)
                FileHandle.standardError.write(Data("catalog-server: created \(role.rawValue) user \(created.user) with key \(created.key)\n".utf8))
                say(secret.text)
            } catch let error as MigrationError {
                Settings.fail("\(error)")
            } catch let error as StoreError {
                Settings.fail("cannot create the key: \(error)")
            }
        }
    }
}
