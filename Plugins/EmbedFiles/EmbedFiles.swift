import Foundation
import PackagePlugin

/// Builds the package's migrations and its OpenAPI document into the binary, so that
/// `catalog-server` copied alone into an empty folder migrates and serves its contract,
/// with no generated copy kept in git: `Migrations/` and `openapi.yaml` are the only
/// sources, and a change to either rebuilds what carries it.
/// - `CatalogStore` gets `EmbeddedMigrations` (`Migrations/*.sql` and `Migrations/postgresql/*.sql`).
/// - `CatalogService` gets `EmbeddedContract` (`openapi.yaml`).
@main
struct EmbedFiles: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let root = context.package.directoryURL
        let tool = try context.tool(named: "embed-files").url
        switch target.name {
        case "CatalogStore":
            let sqlite = try sqlFiles(in: root.appending(path: "Migrations"))
            let postgresql = try sqlFiles(in: root.appending(path: "Migrations/postgresql"))
            let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
            return [
                .buildCommand(
                    displayName: "Embedding \(sqlite.count + postgresql.count) migrations", executable: tool,
                    arguments: ["migrations", output.path(percentEncoded: false)] + sqlite.map(\.path) + ["--postgresql"]
                        + postgresql.map(\.path),
                    inputFiles: sqlite + postgresql, outputFiles: [output])
            ]
        case "CatalogService":
            let document = root.appending(path: "openapi.yaml")
            let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedContract.swift")
            return [
                .buildCommand(
                    displayName: "Embedding openapi.yaml", executable: tool,
                    arguments: ["contract", output.path(percentEncoded: false), document.path(percentEncoded: false)],
                    inputFiles: [document], outputFiles: [output])
            ]
        default:
            throw PluginError("EmbedFiles knows what to embed in CatalogStore and CatalogService, not in \(target.name)")
        }
    }

    /// The `.sql` files directly in `folder`, sorted by name (their version order).
    private func sqlFiles(in folder: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }
}

/// Why the plugin cannot plan the build.
struct PluginError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
