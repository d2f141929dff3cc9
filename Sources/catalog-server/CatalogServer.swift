import ArgumentParser
import CatalogService
import CatalogStore
import Foundation
import HTTPServer

@main
struct CatalogServer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog-server",
        abstract: "Serves the video catalog over HTTP/1.1.",
        subcommands: [Serve.self, Migrate.self],
        defaultSubcommand: Serve.self)
}

/// Options shared by every subcommand that opens the database.
struct DatabaseOptions: ParsableArguments {
    @Option(help: "The SQLite database file (its folder is created if missing).")
    var database = "./data/catalog.sqlite"

    @Option(help: "The folder of NNNN_description.sql migrations (default: ./Migrations, else beside the executable).")
    var migrations: String?

    var migrationsDirectory: URL {
        migrations.map { URL(fileURLWithPath: $0) } ?? Migration.defaultDirectory()
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending migrations and serve (the default).")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The TCP port to listen on (0 picks a free one).")
    var port = 8080

    @Option(help: "Event loop threads (default: one per core).")
    var loopThreads: Int?

    @Option(help: "Seconds a graceful shutdown waits for requests in flight.")
    var shutdownTimeout = 10.0

    @Flag(help: "Do not load the demo catalog into an empty database.")
    var noSeed = false

    @OptionGroup var storage: DatabaseOptions

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535.") }
        if let loopThreads, !(1...256).contains(loopThreads) { throw ValidationError("--loop-threads must be between 1 and 256.") }
        guard shutdownTimeout > 0, shutdownTimeout <= 3600 else { throw ValidationError("--shutdown-timeout must be between 0 and 3600 seconds.") }
    }

    func run() throws {
        var configuration = CatalogConfiguration()
        configuration.server.host = host
        configuration.server.port = port
        if let loopThreads { configuration.server.loopThreads = loopThreads }
        configuration.server.shutdownTimeout = .milliseconds(Int64(shutdownTimeout * 1000))
        configuration.databasePath = storage.database
        configuration.migrationsDirectory = storage.migrationsDirectory
        configuration.seedDemoCatalog = !noSeed
        let application: CatalogApplication
        do {
            application = try CatalogApplication(configuration: configuration)
        } catch let error as MigrationError {
            throw ValidationError("cannot start: \(error)")
        }
        for name in application.store.appliedMigrations { say("applied migration \(name)") }
        if application.seeded { say("loaded the demo catalog") }
        let bound = try application.start()
        say("catalog-server listening on http://\(host):\(bound) (database \(storage.database), SQLite \(application.store.sqliteVersion))")
        try application.runUntilSignal()
        say("catalog-server stopped")
    }
}

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending migrations without serving.")

    @OptionGroup var storage: DatabaseOptions

    func run() throws {
        let migrations = try Migration.load(from: storage.migrationsDirectory)
        do {
            let store = try CatalogStore(path: storage.database, migrations: migrations)
            say(store.appliedMigrations.isEmpty ? "the schema is up to date" : store.appliedMigrations.map { "applied migration \($0)" }.joined(separator: "\n"))
            try store.close()
        } catch let error as MigrationError {
            throw ValidationError("\(error)")
        }
    }
}

/// Writes one line to standard output at once (unbuffered, so pipes and `docker logs`
/// see it immediately).
func say(_ line: String) {
    let text = line + "\n"
    FileHandle.standardOutput.write(Data(text.utf8))
}
