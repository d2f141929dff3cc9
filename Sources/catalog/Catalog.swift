import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

/// `catalog`: the command-line client of the catalog service.
@main
struct Catalog: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog",
        abstract: "Read and change a catalog server's games, playable items, locations, playlists and comments.",
        subcommands: [Games.self, Items.self, Locations.self, Playlists.self, Comments.self, Keys.self, Webhooks.self, Me.self, Export.self, Import.self, Watch.self])
}

/// Options every command takes.
struct Connection: ParsableArguments {
    @Option(help: "The server's base URL (default: $CATALOG_URL, else http://127.0.0.1:8080).")
    var server = ProcessInfo.processInfo.environment["CATALOG_URL"] ?? "http://127.0.0.1:8080"

    @Option(help: "An API key, sent with every request (default: $CATALOG_API_KEY); reads of the public catalog need none.")
    var apiKey: String?

    @Flag(help: "Print a readable table instead of JSON.")
    var table = false

    func client() throws -> CatalogClient {
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
            throw ValidationError("--server must be an http or https URL.")
        }
        let key = apiKey ?? ProcessInfo.processInfo.environment["CATALOG_API_KEY"]
        return CatalogClient(baseURL: url, credentials: key.flatMap { $0.isEmpty ? nil : .apiKey($0) })
    }
}

/// Options of list commands.
struct ListOptions: ParsableArguments {
    @Option(help: "Items per page (1…100).")
    var limit: Int?

    @Option(help: "Sort field, '-' first for descending (createdAt, title or name).")
    var sort: String?

    @Option(help: "Continue after this cursor (the nextCursor of a previous page).")
    var cursor: String?

    @Flag(help: "Follow cursors and print every item, not one page.")
    var all = false

    var query: ListQuery { ListQuery(limit: limit, sort: sort, cursor: cursor) }
}

/// Prints results and turns client errors into a problem's detail on stderr and exit code 1.
enum Output {
    static func run(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as CatalogClientError {
            FileHandle.standardError.write(Data("catalog: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }

    static func json<T: Encodable>(_ value: T) throws {
        FileHandle.standardOutput.write(try CatalogJSON.makeEncoder().encode(value) + Data("\n".utf8))
    }

    /// Prints `rows` under `headers`, columns padded to their widest cell.
    static func table(_ headers: [String], _ rows: [[String]]) {
        let widths = headers.indices.map { column in ([headers] + rows).map { $0[column].count }.max() ?? 0 }
        for row in [headers] + rows {
            let line = row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
            print(line.trimmingCharacters(in: .whitespaces))
        }
    }

    /// Lists one page, or every page with `--all`, as JSON or a table.
    static func list<Model: Codable & Sendable & Hashable & Identifiable>(
        _ resource: ResourceClient<Model, some Codable & Sendable>, _ query: ListQuery, options: ListOptions, connection: Connection,
        columns: [String], row: (Model) -> [String]
    ) async throws where Model.ID == CatalogID {
        var items: [Model] = []
        var nextCursor: String?
        if options.all {
            for try await item in resource.all(query) { items.append(item) }
        } else {
            let page = try await resource.list(query)
            items = page.items
            nextCursor = page.nextCursor
        }
        if connection.table {
            table(columns, items.map(row))
            if let nextCursor { print("next page: --cursor \(nextCursor)") }
        } else {
            try json(Page(items: items, nextCursor: nextCursor))
        }
    }

    /// One resource as JSON (with its ETag on stderr) or a two-column table.
    static func one<Model: Codable & Sendable>(_ tagged: Tagged<Model>, connection: Connection, fields: (Model) -> [(String, String)]) throws {
        if connection.table {
            table(["field", "value"], fields(tagged.value).map { [$0.0, $0.1] } + [["etag", tagged.etag]])
        } else {
            try json(tagged.value)
        }
    }

    static func id(_ text: String) throws -> CatalogID {
        guard let id = CatalogID(text) else { throw ValidationError("'\(text)' is not an id (a UUID).") }
        return id
    }
}
