import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

/// What the generic commands need to know about a resource.
protocol CLIResource {
    associatedtype Model: Codable & Sendable & Hashable & Identifiable where Model.ID == CatalogID
    associatedtype Input: Codable & Sendable
    /// The resource's name in help texts, such as `game`.
    static var noun: String { get }
    static func resource(_ client: CatalogClient) -> ResourceClient<Model, Input>
    /// The rows of `--table` output for one resource.
    static func fields(_ model: Model) -> [(String, String)]
    /// The options `list` takes besides paging and sorting.
    associatedtype Filters: ListFilters
    /// The columns of `list --table`, and the row of one resource.
    static var listColumns: [String] { get }
    static func listRow(_ model: Model) -> [String]
}

/// Options of a resource's `list` beyond paging and sorting.
protocol ListFilters: ParsableArguments {
    /// Adds the options given to `query`.
    func apply(to query: inout ListQuery) throws
}

/// `--q`: full-text search.
struct SearchFilter: ListFilters {
    @Option(name: .customLong("q"), help: "Full-text search.") var search: String?

    func apply(to query: inout ListQuery) { query.search = search }
}

/// `catalog <resource> list [options]`.
struct ListCommand<R: CLIResource>: AsyncParsableCommand {
    static var configuration: CommandConfiguration { CommandConfiguration(commandName: "list", abstract: "List \(R.noun)s.") }

    @OptionGroup var connection: Connection
    @OptionGroup var options: ListOptions
    @OptionGroup var filters: R.Filters

    func run() async throws {
        var query = options.query
        try filters.apply(to: &query)
        try await Output.run {
            try await Output.list(R.resource(connection.client()), query, options: options, connection: connection, columns: R.listColumns, row: R.listRow)
        }
    }
}

/// `catalog <resource> get ID`.
struct GetCommand<R: CLIResource>: AsyncParsableCommand {
    static var configuration: CommandConfiguration { CommandConfiguration(commandName: "get", abstract: "Show one \(R.noun).") }

    @OptionGroup var connection: Connection
    @Argument(help: ArgumentHelp("The \(R.noun)'s id.")) var id: String

    func run() async throws {
        let id = try Output.id(id)
        try await Output.run { try Output.one(try await R.resource(connection.client()).get(id), connection: connection, fields: R.fields) }
    }
}

/// `catalog <resource> delete ID [--if-match ETAG]`.
struct DeleteCommand<R: CLIResource>: AsyncParsableCommand {
    static var configuration: CommandConfiguration { CommandConfiguration(commandName: "delete", abstract: "Delete one \(R.noun).") }

    @OptionGroup var connection: Connection
    @Argument(help: ArgumentHelp("The \(R.noun)'s id.")) var id: String
    @Option(help: ArgumentHelp("Delete only if the \(R.noun) is still at this ETag.")) var ifMatch: String?

    func run() async throws {
        let id = try Output.id(id)
        try await Output.run { try await R.resource(connection.client()).delete(id, ifMatch: ifMatch) }
    }
}

/// `image set ID FILE` and `image remove ID`: a resource's image (artwork, poster, cover, avatar).
struct ImageCommand<R: CLIResource>: AsyncParsableCommand where R.Model: ShowsImage {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "image", abstract: "The \(R.noun)'s image.", subcommands: [SetImage<R>.self, RemoveImage<R>.self])
    }
}

struct SetImage<R: CLIResource>: AsyncParsableCommand where R.Model: ShowsImage {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "set", abstract: "Upload a JPEG, PNG, WebP, HEIC or AVIF file (at most 20 MB) as the \(R.noun)'s image.")
    }

    @OptionGroup var connection: Connection
    @Argument(help: ArgumentHelp("The \(R.noun)'s id.")) var id: String
    @Argument(help: "The image file.") var file: String
    @Option(help: ArgumentHelp("Only if the \(R.noun) is still at this ETag.")) var ifMatch: String?

    func run() async throws {
        let id = try Output.id(id)
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch { throw ValidationError("Cannot read \(file): \(error.localizedDescription)") }
        guard let format = ImageFormat.sniff(data) else { throw ValidationError("\(file) is not a JPEG, PNG, WebP, HEIC or AVIF image.") }
        try await Output.run {
            try Output.one(try await R.resource(connection.client()).setImage(of: id, data, format: format, ifMatch: ifMatch), connection: connection, fields: R.fields)
        }
    }
}

struct RemoveImage<R: CLIResource>: AsyncParsableCommand where R.Model: ShowsImage {
    static var configuration: CommandConfiguration { CommandConfiguration(commandName: "remove", abstract: "Remove the \(R.noun)'s image.") }

    @OptionGroup var connection: Connection
    @Argument(help: ArgumentHelp("The \(R.noun)'s id.")) var id: String
    @Option(help: ArgumentHelp("Only if the \(R.noun) is still at this ETag.")) var ifMatch: String?

    func run() async throws {
        let id = try Output.id(id)
        try await Output.run { try await R.resource(connection.client()).removeImage(of: id, ifMatch: ifMatch) }
    }
}
