import CatalogModels
import CatalogSchema
import Foundation
import GRDB

/// Comments: reads, lists and edits through the generic ``ResourceStore``; posting and
/// deleting here, since they change the thread (reply counts, tombstones).
public final class CommentStore: Sendable {
    /// Reads, lists (`commentsOn`, `repliesTo` scopes) and edits.
    public let resources: ResourceStore<Comment, CommentEdit>

    private let insertSQL: String
    private let creationMembers: [Int]

    init(database: CatalogDatabase) {
        resources = ResourceStore(.comment, database: database, relations: Relations(filter: { scope in
            switch scope {
            case .commentsOn: "t.playable_item_id = ? AND t.parent_id IS NULL"
            case .repliesTo: "t.parent_id = ?"
            case .playlistsContaining, .keysOf: nil
            }
        }, importing: ImportRules(checkNew: { db, record, pointer in
            guard let itemID = record[column: "playable_item_id"]?.text, let parentID = record[column: "parent_id"]?.text,
                  let field = record.field(column: "parent_id") else { return }
            let parent = try Row.fetchOne(db.cachedStatement(sql: "SELECT playable_item_id, parent_id FROM comments WHERE id = ?"), arguments: [parentID])
            guard let parent, parent["playable_item_id"] as String == itemID, parent["parent_id"] as String? == nil else {
                throw StoreError.invalid([Violation(.invalidParent, "Must be a top-level comment on the same item, imported earlier.").at(pointer + field.pointer)])
            }
        }, finish: { db, records in
            // Reply counts follow the replies actually there: a thread whose count the records
            // got wrong, or that gained a reply only here, is corrected (a change: version + 1).
            let threads = Set(records.compactMap { record in (record[column: "parent_id"]?.text ?? record[column: "id"]?.text) })
            let recount = try db.cachedStatement(sql: """
                UPDATE comments SET reply_count = (SELECT count(*) FROM comments r WHERE r.parent_id = comments.id), version = version + 1
                WHERE id = ? AND reply_count != (SELECT count(*) FROM comments r WHERE r.parent_id = comments.id)
                """)
            for id in threads.sorted() { try recount.execute(arguments: [id]) }
        })))
        let creation = ResourceSchema.comment.creationColumns
        creationMembers = creation.map(\.index)
        let writer = ResourceSchema.commentWriter
        let columns = ["id", "playable_item_id"] + creation.map(\.column) + ["created_at", "updated_at", "version", writer.user, writer.name]
        insertSQL = insertStatement(ResourceSchema.comment.table, columns) + resources.returning
    }

    /// Posts `values` (read by ``ResourceSchema/creation`` of comments) by the user
    /// `writer` on the item `itemID`: a top-level comment, or a reply when they name a
    /// parent, a top-level comment on the same item. Fails with `notFound` when the item
    /// (or the writer) does not exist, and `invalid` naming the parent when it is unknown,
    /// on another item, a reply or deleted.
    package func post(on itemID: CatalogID, by writer: CatalogID, _ values: FieldValues,
                      completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        let parentID = values[column: "parent_id"]?.text
        resources.submit(atomic: parentID != nil, completion) { [self] db in
            guard let name = try String.fetchOne(db.cachedStatement(sql: "SELECT display_name FROM users WHERE id = ?"), arguments: [writer.rawValue])
            else { throw StoreError.notFound }
            return try insert(db, values, on: itemID, writer: (writer, name), at: Timestamp.milliseconds(Date()))
        }
    }

    /// Posts `input` by the user `writer` on the item `itemID`, checked as a body.
    public func post(on itemID: CatalogID, by writer: CatalogID, _ input: CommentInput,
                     completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        switch readValues(input, ResourceSchema.comment.creation) {
        case let .success(values): post(on: itemID, by: writer, values, completion: completion)
        case let .failure(error): completion(.failure(error))
        }
    }

    /// Inserts a comment on `itemID` by `writer` (a user, or only a name for comments
    /// without accounts) created at `time`, updating its parent's reply count (a change
    /// of the parent) when `countsReply`.
    func insert(_ db: Database, _ values: FieldValues, on itemID: CatalogID, writer: (id: CatalogID?, name: String), at time: Int64,
                countsReply: Bool = true) throws -> RenderedResource {
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM playable_items WHERE id = ?"), arguments: [itemID.rawValue]) != nil else {
            throw StoreError.notFound
        }
        let parentID = values[column: "parent_id"]?.text
        if let parentID, let field = values.field(column: "parent_id") {
            try Self.checkParent(db, parentID, itemID: itemID, pointer: field.pointer)
        }
        let id = CatalogID()
        let arguments = [id.rawValue, itemID.rawValue] + resources.arguments(values, creationMembers) + [time, time, 1, writer.id?.rawValue, writer.name]
        let created = try resources.renderWritten(db, insertSQL, StatementArguments(arguments))
        if let parentID, countsReply {
            try db.cachedStatement(sql: """
                UPDATE comments SET reply_count = reply_count + 1, version = version + 1, updated_at = max(?, created_at) WHERE id = ?
                """).execute(arguments: [time, parentID])
        }
        return created
    }

    /// Checks that `parentID` is a live top-level comment on the item `itemID`.
    private static func checkParent(_ db: Database, _ parentID: String, itemID: CatalogID, pointer: String) throws {
        let parent = try Row.fetchOne(db.cachedStatement(sql: "SELECT playable_item_id, parent_id, deleted FROM comments WHERE id = ?"),
                                      arguments: [parentID])
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
        if let violation { throw StoreError.invalid([violation.at(pointer)]) }
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
