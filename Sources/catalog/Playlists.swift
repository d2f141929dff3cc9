import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

struct Playlists: AsyncParsableCommand, CLIResource {
    static let configuration = CommandConfiguration(
        abstract: "Playlists and their entries.",
        subcommands: [List.self, Show.self, Create.self, Add.self, Move.self, Remove.self, DeleteCommand<Playlists>.self])
    static let noun = "playlist"

    static func resource(_ client: CatalogClient) -> ResourceClient<Playlist, PlaylistInput> { client.playlists }

    static func fields(_ playlist: Playlist) -> [(String, String)] {
        [("id", playlist.id.rawValue), ("title", playlist.title), ("description", playlist.description),
         ("entryCount", "\(playlist.entryCount)"), ("version", "\(playlist.version)")]
    }

    static func entryFields(_ entry: PlaylistEntry) -> [(String, String)] {
        [("entryId", entry.entryId.rawValue), ("position", "\(entry.position)"), ("playableItemId", entry.playableItem.id.rawValue),
         ("title", entry.playableItem.title)]
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List playlists.")
        @OptionGroup var connection: Connection
        @OptionGroup var options: ListOptions
        @Option(name: .customLong("q"), help: "Full-text search.") var search: String?
        @Option(help: "Only the playlists holding this playable item.") var item: String?

        func run() async throws {
            var query = options.query
            query.search = search
            query.playableItemId = try item.map(Output.id)
            try await Output.run {
                try await Output.list(connection.client().playlists, query, options: options, connection: connection,
                                      columns: ["id", "title", "entries"]) { [$0.id.rawValue, $0.title, "\($0.entryCount)"] }
            }
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

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a playable item to a playlist (appended unless --position).")
        @OptionGroup var connection: Connection
        @Argument(help: "The playlist's id.") var playlist: String
        @Argument(help: "The playable item's id.") var item: String
        @Option(help: "Where to insert it (0 is first).") var position: Int?
        @Option(help: "Only if the playlist is still at this ETag.") var ifMatch: String?

        func run() async throws {
            let (playlist, item) = (try Output.id(playlist), try Output.id(item))
            try await Output.run {
                let added = try await connection.client().entries(of: playlist).add(item, at: position, ifMatch: ifMatch)
                try Output.one(added, connection: connection, fields: Playlists.entryFields)
            }
        }
    }

    struct Move: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Move an entry to another position, shifting the others.")
        @OptionGroup var connection: Connection
        @Argument(help: "The playlist's id.") var playlist: String
        @Argument(help: "The entry's id (entryId, not the item's).") var entry: String
        @Option(help: "The new position (0 is first).") var to: Int
        @Option(help: "Only if the playlist is still at this ETag.") var ifMatch: String?

        func run() async throws {
            let (playlist, entry) = (try Output.id(playlist), try Output.id(entry))
            try await Output.run {
                let moved = try await connection.client().entries(of: playlist).move(entry, to: to, ifMatch: ifMatch)
                try Output.one(moved, connection: connection, fields: Playlists.entryFields)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an entry from a playlist, closing the gap.")
        @OptionGroup var connection: Connection
        @Argument(help: "The playlist's id.") var playlist: String
        @Argument(help: "The entry's id.") var entry: String
        @Option(help: "Only if the playlist is still at this ETag.") var ifMatch: String?

        func run() async throws {
            let (playlist, entry) = (try Output.id(playlist), try Output.id(entry))
            try await Output.run {
                let etag = try await connection.client().entries(of: playlist).remove(entry, ifMatch: ifMatch)
                FileHandle.standardError.write(Data("removed; the playlist is now at ETag \(etag)\n".utf8))
            }
        }
    }
}

struct Comments: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Comments on playable items.", subcommands: [List.self, Replies.self, Post.self, Delete.self])

    static func columns(_ comment: CatalogModels.Comment) -> [String] {
        [comment.id.rawValue, comment.author, comment.deleted ? "(deleted)" : (comment.body ?? ""), "\(comment.replyCount)"]
    }

    static func fields(_ comment: CatalogModels.Comment) -> [(String, String)] {
        [("id", comment.id.rawValue), ("playableItemId", comment.playableItemId.rawValue), ("parentId", comment.parentId?.rawValue ?? ""),
         ("author", comment.author), ("body", comment.body ?? "(deleted)"), ("replyCount", "\(comment.replyCount)"), ("version", "\(comment.version)")]
    }

    /// Prints one page, or all with `--all`.
    static func list(_ connection: Connection, _ options: ListOptions,
                     page: @escaping @Sendable (CommentsClient, ListQuery) async throws -> Page<CatalogModels.Comment>) async throws {
        try await Output.run {
            let comments = try connection.client().comments
            var result = try await page(comments, options.query)
            if options.all {
                var items = result.items
                var query = options.query
                while let cursor = result.nextCursor {
                    query.cursor = cursor
                    result = try await page(comments, query)
                    items += result.items
                }
                result = Page(items: items, nextCursor: nil)
            }
            if connection.table {
                Output.table(["id", "author", "body", "replies"], result.items.map(columns))
                if let next = result.nextCursor { print("next page: --cursor \(next)") }
            } else {
                try Output.json(result)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the comments on a playable item (newest first; --sort createdAt for oldest).")
        @OptionGroup var connection: Connection
        @OptionGroup var options: ListOptions
        @Argument(help: "The playable item's id.") var item: String

        func run() async throws {
            let item = try Output.id(item)
            try await Comments.list(connection, options) { try await $0.list(on: item, $1) }
        }
    }

    struct Replies: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the replies to a comment (oldest first).")
        @OptionGroup var connection: Connection
        @OptionGroup var options: ListOptions
        @Argument(help: "The comment's id.") var comment: String

        func run() async throws {
            let comment = try Output.id(comment)
            try await Comments.list(connection, options) { try await $0.replies(to: comment, $1) }
        }
    }

    struct Post: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Post a comment on a playable item, or a reply with --reply-to.")
        @OptionGroup var connection: Connection
        @Argument(help: "The playable item's id.") var item: String
        @Option var author: String
        @Option var body: String
        @Option(help: "The id of the top-level comment to reply to.") var replyTo: String?

        func run() async throws {
            let item = try Output.id(item)
            let input = CommentInput(author: author, body: body, parentId: try replyTo.map(Output.id))
            try await Output.run { try Output.one(try await connection.client().comments.post(on: item, input), connection: connection, fields: Comments.fields) }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a comment (one with replies stays as a tombstone).")
        @OptionGroup var connection: Connection
        @Argument(help: "The comment's id.") var id: String
        @Option(help: "Only if the comment is still at this ETag.") var ifMatch: String?

        func run() async throws {
            let id = try Output.id(id)
            try await Output.run { try await connection.client().comments.delete(id, ifMatch: ifMatch) }
        }
    }
}
