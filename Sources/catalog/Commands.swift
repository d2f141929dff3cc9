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
