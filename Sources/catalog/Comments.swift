import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

struct Comments: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Comments on playable items.", subcommands: [List.self, Replies.self, Post.self, Delete.self])

    static func columns(_ comment: CatalogModels.Comment) -> [String] {
        [comment.id.rawValue, comment.author, comment.deleted ? "(deleted)" : (comment.body ?? ""), "\(comment.replyCount)"]
    }

    static func fields(_ comment: CatalogModels.Comment) -> [(String, String)] {
        [
            ("id", comment.id.rawValue), ("playableItemId", comment.playableItemId.rawValue), ("parentId", comment.parentId?.rawValue ?? ""),
            ("author", comment.author), ("body", comment.body ?? "(deleted)"), ("replyCount", "\(comment.replyCount)"), ("version", "\(comment.version)"),
        ]
    }

    /// Prints one page, or every page with `--all`.
    static func list(
        _ connection: Connection, _ options: ListOptions,
        page: @escaping @Sendable (CommentsClient, ListQuery) async throws -> Page<CatalogModels.Comment>,
        all: @escaping @Sendable (CommentsClient, ListQuery) -> AsyncThrowingStream<CatalogModels.Comment, any Error>
    ) async throws {
        try await Output.run {
            let comments = try connection.client().comments
            let result: Page<CatalogModels.Comment>
            if options.all {
                var items: [CatalogModels.Comment] = []
                for try await comment in all(comments, options.query) { items.append(comment) }
                result = Page(items: items, nextCursor: nil)
            } else {
                result = try await page(comments, options.query)
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
            try await Comments.list(connection, options, page: { try await $0.list(on: item, $1) }, all: { $0.all(on: item, $1) })
        }
    }

    struct Replies: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the replies to a comment (oldest first).")
        @OptionGroup var connection: Connection
        @OptionGroup var options: ListOptions
        @Argument(help: "The comment's id.") var comment: String

        func run() async throws {
            let comment = try Output.id(comment)
            try await Comments.list(connection, options, page: { try await $0.replies(to: comment, $1) }, all: { $0.allReplies(to: comment, $1) })
        }
    }

    struct Post: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Post a comment on a playable item, or a reply with --reply-to.")
        @OptionGroup var connection: Connection
        @Argument(help: "The playable item's id.") var item: String
        @Option var body: String
        @Option(help: "The id of the top-level comment to reply to.") var replyTo: String?

        func run() async throws {
            let item = try Output.id(item)
            let input = CommentInput(body: body, parentId: try replyTo.map(Output.id))
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
