import CatalogModels
import Foundation
import GRDB

/// Comments: reads, lists and edits through the generic ``ResourceStore``; posting and
/// deleting here, since they change the thread (reply counts, tombstones).
public final class CommentStore: Sendable {
    /// Reads, lists (`commentsOn`, `repliesTo` scopes) and edits.
    public let resources: ResourceStore<Comment, CommentEdit>

    private let insertSQL: String

    init(database: CatalogDatabase) {
        resources = ResourceStore(CommentTable.self, database: database)
        let columns = ["id", "playable_item_id", "parent_id", "author", "body", "created_at", "updated_at", "version"]
        insertSQL = "INSERT INTO comments (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"
            + " RETURNING " + CommentTable.renderer.columns.joined(separator: ", ")
    }

    /// Posts `input` on the item `itemID`: a top-level comment, or a reply when
    /// `input.parentId` names a top-level comment on the same item.
    /// Fails with `notFound` when the item does not exist, and `invalid` naming
    /// `/parentId` when the parent is unknown, on another item, a reply or deleted.
    public func post(on itemID: CatalogID, _ input: CommentInput, completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        let id = CatalogID()
        resources.submit(atomic: input.parentId != nil, completion) { [self] db in
            guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM playable_items WHERE id = ?"), arguments: [itemID.rawValue]) != nil else {
                throw StoreError.notFound
            }
            let now = Timestamp.milliseconds(Date())
            if let parentID = input.parentId {
                try Self.checkParent(db, parentID, itemID: itemID)
            }
            let values: [(any DatabaseValueConvertible)?] = [id.rawValue, itemID.rawValue, input.parentId?.rawValue, input.author, input.body, now, now, 1]
            let created = try resources.renderWritten(db, insertSQL, StatementArguments(values))
            if let parentID = input.parentId {
                try db.cachedStatement(sql: """
                    UPDATE comments SET reply_count = reply_count + 1, version = version + 1, updated_at = max(?, created_at) WHERE id = ?
                    """).execute(arguments: [now, parentID.rawValue])
            }
            return created
        }
    }

    /// Checks that `parentID` is a live top-level comment on the item `itemID`.
    private static func checkParent(_ db: Database, _ parentID: CatalogID, itemID: CatalogID) throws {
        let parent = try Row.fetchOne(db.cachedStatement(sql: "SELECT playable_item_id, parent_id, deleted FROM comments WHERE id = ?"),
                                      arguments: [parentID.rawValue])
        let violation: Violation? = if let parent {
            if parent["playable_item_id"] as String != itemID.rawValue {
                Violation(.notFound, "No comment with this id is on this playable item.")
            } else if parent["parent_id"] as String? != nil {
                Violation(.invalidParent, "Replies cannot be replied to; reply to the comment they answer.")
            } else if parent["deleted"] as Bool {
                Violation(.invalidParent, "The comment was deleted.")
            } else {
                nil
            }
        } else {
            Violation(.notFound, "No comment has this id.")
        }
        if let violation { throw StoreError.invalid([violation.at("/parentId")]) }
    }

    /// Deletes the comment `id`, if `preconditions` hold. A comment with replies stays
    /// as a tombstone (no body, `deleted`) so its thread remains readable; deleting a
    /// reply updates its parent's reply count and removes the parent once it is a
    /// tombstone without replies. Deleting a tombstone changes nothing.
    public func delete(_ id: CatalogID, preconditions: WritePreconditions, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        resources.submit(atomic: true, completion) { db in
            let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT version, parent_id, reply_count, deleted FROM comments WHERE id = ?"),
                                       arguments: [id.rawValue])
            try preconditions.check(current: row?["version"])
            guard let row else { throw StoreError.notFound }
            let now = Timestamp.milliseconds(Date())
            if row["reply_count"] as Int > 0 {
                guard !(row["deleted"] as Bool) else { return }
                try db.cachedStatement(sql: """
                    UPDATE comments SET deleted = 1, body = NULL, version = version + 1, updated_at = max(?, created_at) WHERE id = ?
                    """).execute(arguments: [now, id.rawValue])
                return
            }
            try db.cachedStatement(sql: "DELETE FROM comments WHERE id = ?").execute(arguments: [id.rawValue])
            if let parentID = row["parent_id"] as String? {
                try db.cachedStatement(sql: """
                    UPDATE comments SET reply_count = reply_count - 1, version = version + 1, updated_at = max(?, created_at) WHERE id = ?
                    """).execute(arguments: [now, parentID])
                try db.cachedStatement(sql: "DELETE FROM comments WHERE id = ? AND deleted = 1 AND reply_count = 0").execute(arguments: [parentID])
            }
        }
    }
}
