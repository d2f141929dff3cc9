import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

struct Playlists: AsyncParsableCommand, CLIResource {
    static let configuration = CommandConfiguration(
        abstract: "Playlists and their entries.",
        subcommands: [
            ListCommand<Playlists>.self, Show.self, Create.self, Add.self, Move.self, Remove.self, DeleteCommand<Playlists>.self,
            ImageCommand<Playlists>.self,
        ])
    static let noun = "playlist"

    static func resource(_ client: CatalogClient) -> ResourceClient<Playlist, PlaylistInput> { client.playlists }

    static func fields(_ playlist: Playlist) -> [(String, String)] {
        [
            ("id", playlist.id.rawValue), ("title", playlist.title), ("description", playlist.description),
            ("entryCount", "\(playlist.entryCount)"), ("image", playlist.image?.url ?? ""), ("version", "\(playlist.version)"),
        ]
    }

    static func entryFields(_ entry: PlaylistEntry) -> [(String, String)] {
        [
            ("entryId", entry.entryId.rawValue), ("position", "\(entry.position)"), ("playableItemId", entry.playableItem.id.rawValue),
            ("title", entry.playableItem.title),
        ]
    }

    static let listColumns = ["id", "title", "entries"]
    static func listRow(_ playlist: Playlist) -> [String] { [playlist.id.rawValue, playlist.title, "\(playlist.entryCount)"] }

    /// `--q` and `--item`: search, and the playlists holding an item.
    struct Filters: ListFilters {
        @Option(name: .customLong("q"), help: "Full-text search.") var search: String?
        @Option(help: "Only the playlists holding this playable item.") var item: String?

        func apply(to query: inout ListQuery) throws {
            query.search = search
            query.playableItemId = try item.map(Output.id)
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a playlist with all its entries, in order.")
        @OptionGroup var connection: Connection
        @Argument(help: "The playlist's id.") var id: String

        func run() async throws {
            let id = try Output.id(id)
            try await Output.run {
                let client = try connection.client()
                // The first page comes embedded; the rest follow its cursor.
                var playlist = try await client.playlists.get(id, include: ["entries"]).value
                var entries = playlist.entries?.items ?? []
                if let cursor = playlist.entries?.nextCursor {
                    for try await entry in client.entries(of: id).all(ListQuery(limit: 100, cursor: cursor)) { entries.append(entry) }
                }
                playlist.entries = Page(items: entries, nextCursor: nil)
                if connection.table {
                    Output.table(["field", "value"], Playlists.fields(playlist).map { [$0.0, $0.1] })
                    print("")
                    Output.table(["position", "entryId", "title"], entries.map { ["\($0.position)", $0.entryId.rawValue, $0.playableItem.title] })
                } else {
                    try Output.json(playlist)
                }
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an empty playlist.")
        @OptionGroup var connection: Connection
        @Option var title: String
        @Option var description = ""

        func run() async throws {
            let input = PlaylistInput(title: title, description: description)
            try await Output.run { try Output.one(try await connection.client().playlists.create(input), connection: connection, fields: Playlists.fields) }
        }
    }

    /// The playlist an entry command changes, and its precondition.
    struct Target: ParsableArguments {
        @OptionGroup var connection: Connection
        @Argument(help: "The playlist's id.") var playlist: String
        @Option(help: "Only if the playlist is still at this ETag.") var ifMatch: String?

        func entries() throws -> PlaylistEntriesClient {
            try connection.client().entries(of: Output.id(playlist))
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a playable item to a playlist (appended unless --position).")
        @OptionGroup var target: Target
        @Argument(help: "The playable item's id.") var item: String
        @Option(help: "Where to insert it (0 is first).") var position: Int?

        func run() async throws {
            let item = try Output.id(item)
            try await Output.run {
                let added = try await target.entries().add(item, at: position, ifMatch: target.ifMatch)
                try Output.one(added, connection: target.connection, fields: Playlists.entryFields)
            }
        }
    }

    struct Move: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Move an entry to another position, shifting the others.")
        @OptionGroup var target: Target
        @Argument(help: "The entry's id (entryId, not the item's).") var entry: String
        @Option(help: "The new position (0 is first).") var to: Int

        func run() async throws {
            let entry = try Output.id(entry)
            try await Output.run {
                let moved = try await target.entries().move(entry, to: to, ifMatch: target.ifMatch)
                try Output.one(moved, connection: target.connection, fields: Playlists.entryFields)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an entry from a playlist, closing the gap.")
        @OptionGroup var target: Target
        @Argument(help: "The entry's id.") var entry: String

        func run() async throws {
            let entry = try Output.id(entry)
            try await Output.run {
                let etag = try await target.entries().remove(entry, ifMatch: target.ifMatch)
                FileHandle.standardError.write(Data("removed; the playlist is now at ETag \(etag)\n".utf8))
            }
        }
    }
}
