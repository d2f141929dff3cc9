import CatalogModels
import Foundation
import GRDB

/// `comments`: comments on playable items and their replies (one level). Writes that
/// touch a thread live in ``CommentStore``.
enum CommentTable: ResourceTable {
    static let table = "comments"
    /// What an edit changes.
    static let dataColumns = ["author", "body"]
    static let sortColumns = ["createdAt": "created_at"]
    static let search: (table: String, weights: String)? = nil
    static let renderer = RowRenderer([
        RenderedField("id", "id", .text), RenderedField("playableItemId", "playable_item_id", .text),
        RenderedField("parentId", "parent_id", .text), RenderedField("author", "author", .text), RenderedField("body", "body", .text),
        RenderedField("deleted", "deleted", .boolean), RenderedField("replyCount", "reply_count", .integer),
        RenderedField("createdAt", "created_at", .timestamp), RenderedField("updatedAt", "updated_at", .timestamp),
        RenderedField("version", "version", .integer),
    ])

    static func values(_ input: CommentEdit) -> [(any DatabaseValueConvertible)?] {
        [input.author, input.body]
    }

    static func model(_ row: Row) -> Comment {
        let meta = meta(row)
        return Comment(id: meta.id, playableItemId: CatalogID(row["playable_item_id"] as String) ?? CatalogID(),
                       parentId: (row["parent_id"] as String?).flatMap(CatalogID.init), author: row["author"], body: row["body"],
                       deleted: row["deleted"], replyCount: row["reply_count"],
                       createdAt: meta.createdAt, updatedAt: meta.updatedAt, version: meta.version)
    }

    static func filter(_ scope: ListRequest.Scope) -> String? {
        switch scope {
        case .commentsOn: "t.playable_item_id = ? AND t.parent_id IS NULL"
        case .repliesTo: "t.parent_id = ?"
        case .playlistsContaining: nil
        }
    }
}

/// What an edit of a comment sets: its author and body.
public struct CommentEdit: Codable, Sendable, Hashable {
    /// 1…100 characters.
    public var author: String
    /// 1…5,000 characters.
    public var body: String

    /// Creates an edit.
    public init(author: String, body: String) {
        self.author = author
        self.body = body
    }
}
