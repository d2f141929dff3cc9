import CatalogStore
import Foundation
import HTTPServer
import ServiceTestSupport
import Testing

@testable import CatalogService

/// `openapi.yaml` and the server describe the same API.
@Suite struct ContractTests {

    @Test func theBuildCarriesTheMigrationsAndTheDocumentAsTheyAreInTheRepository() throws {
        // Migrations/ and openapi.yaml are the only sources: the EmbedFiles plugin builds them in.
        #expect(Migration.embedded == (try Migration.load(from: migrationsDirectory)))
        #expect(Migration.embedded(for: .postgresql) == (try Migration.load(from: migrationsDirectory.appendingPathComponent("postgresql"))))
        #expect(Array(EmbeddedContract.document.utf8) == Array(try Data(contentsOf: Fixtures.contract)))
        #expect(Migration.embedded.count >= 5)
    }

    /// (METHOD, path) pairs under `paths:`, read with the document's fixed indentation.
    static func documentedRoutes() throws -> Set<String> {
        let text = try String(contentsOf: Fixtures.contract, encoding: .utf8)
        var routes = Set<String>()
        var inPaths = false
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "paths:" { inPaths = true; continue }
            if inPaths, let first = line.first, first != " " { break }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":"), !line.hasPrefix("   ") {
                path = String(line.dropFirst(2).dropLast())
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     ") {
                let key = line.dropFirst(4).prefix { $0 != ":" }
                if ["get", "put", "post", "patch", "delete", "head", "options"].contains(key) {
                    routes.insert("\(key.uppercased()) \(path)")
                }
            }
        }
        return routes
    }

    @Test(arguments: TestEngine.all) func everyServedRouteIsDocumentedAndViceVersa(_ engine: DatabaseEngine) throws {
        try TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let served = Set(catalog.application.routeTable.map { "\($0.method) \($0.pattern)" })
            let documented = try Self.documentedRoutes()
            #expect(documented.count >= 15)
            #expect(served.subtracting(documented).isEmpty, "served but not documented: \(served.subtracting(documented).sorted())")
            #expect(documented.subtracting(served).isEmpty, "documented but not served: \(documented.subtracting(served).sorted())")
        }
    }

    @Test(arguments: TestEngine.all) func theDocumentIsServed(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let response = try await catalog.client.get("/openapi.yaml")
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "application/yaml")
            #expect(response.body == (try Data(contentsOf: Fixtures.contract)))
        }
    }
}
