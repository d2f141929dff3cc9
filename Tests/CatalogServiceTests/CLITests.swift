import CatalogModels
import Foundation
import Testing

/// The `catalog` command-line client against a real server.
@Suite struct CLITests {
    struct Run {
        let status: Int32
        let output: String
        let errors: String
    }

    static func run(_ arguments: [String], server: URL) throws -> Run {
        let process = Process()
        process.executableURL = ExecutableTests.executable.deletingLastPathComponent().appendingPathComponent("catalog")
        process.arguments = arguments
        process.environment = ["CATALOG_URL": server.absoluteString]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: out, as: UTF8.self), errors: String(decoding: err, as: UTF8.self))
    }

    @Test func createGetListAndErrors() async throws {
        let catalog = try TestCatalog(seed: false)
        let server = catalog.client.baseURL
        let created = try Self.run(["games", "create", "--name", "Pac-Man", "--image-name", "pac-man"], server: server)
        #expect(created.status == 0, "\(created.errors)")
        let game = try CatalogJSON.makeDecoder().decode(Game.self, from: Data(created.output.utf8))
        #expect(game.name == "Pac-Man")

        let fetched = try Self.run(["games", "get", game.id.rawValue], server: server)
        #expect(try CatalogJSON.makeDecoder().decode(Game.self, from: Data(fetched.output.utf8)) == game)

        let table = try Self.run(["games", "list", "--table"], server: server)
        #expect(table.output.split(separator: "\n").first?.hasPrefix("id") == true)
        #expect(table.output.contains("Pac-Man"))

        let invalid = try Self.run(["games", "create", "--name", "", "--image-name", "x"], server: server)
        #expect(invalid.status == 1)
        #expect(invalid.errors.contains("422"))
        #expect(invalid.output.isEmpty)

        let missing = try Self.run(["items", "get", CatalogID().rawValue], server: server)
        #expect(missing.status == 1)
        #expect(missing.errors.contains("No resource exists with this id."))

        let unreachable = try Self.run(["games", "list", "--server", "http://127.0.0.1:1"], server: server)
        #expect(unreachable.status == 1)
        #expect(unreachable.errors.hasPrefix("catalog: transport"))
    }
}
