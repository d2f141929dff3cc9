import CatalogModels
import CatalogSchema
import Foundation

/// Comments: reads, lists and edits through the generic ``ResourceStore``; posting and
/// deleting here, since they change the thread (reply counts, tombstones).
public final class CommentStore: Sendable {
    /// Reads, lists (`commentsOn`, `repliesTo` scopes) and edits.
    public let resources: ResourceStore

    private let insertSQL: String
    private let creationMembers: [Int]

    /// What an import of comments does beyond the generic upsert: a reply's parent must be
    /// a top-level comment on the same item, and reply counts follow the replies there.
    static let relations = Relations(
        importing: ImportRules(
            checkNew: { db, record, pointer in
                guard let itemID = record[column: "playable_item_id"]?.text, let parentID = record[column: "parent_id"]?.text,
                    let field = record.field(column: "parent_id")
                else { return }
                let parent = try db.fetchRow("SELECT playable_item_id, parent_id FROM comments WHERE id = ?", [parentID])
                guard let parent, parent[0].string == itemID, parent[1] == .null else {
                    throw StoreError.invalid([Violation(.invalidParent, "Must be a top-level comment on the same item, imported earlier.").at(pointer + field.pointer)])
                }
            },
            finish: { db, records in
                // Reply counts follow the replies actually there: a thread whose count the records
                // got wrong, or that gained a reply only here, is corrected (a change: version + 1).
                let threads = Set(records.compactMap { record in (record[column: "parent_id"]?.text ?? record[column: "id"]?.text) })
                for id in threads.sorted() {
                    try db.execute(
                        """
                        UPDATE comments SET reply_count = (SELECT count(*) FROM comments r WHERE r.parent_id = comments.id), version = version + 1
                        WHERE id = ? AND reply_count != (SELECT count(*) FROM comments r WHERE r.parent_id = comments.id)
                        """, [id])
                }
            }))

    /// Comments over their declared store (`resources`, made with ``relations``).
    init(resources: ResourceStore) {
        self.resources = resources
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
    package func post(
        on itemID: CatalogID, by writer: CatalogID, _ values: FieldValues, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        let parentID = values[column: "parent_id"]?.text
        resources.submit(options, atomic: parentID != nil, completion) { [self] db in
            guard let name = try db.fetchValue("SELECT display_name FROM users WHERE id = ?", [writer.rawValue]).string else { throw StoreError.notFound }
            return try insert(db, values, on: itemID, writer: (writer, name), at: Timestamp.milliseconds(Date()))
        }
    }

    /// Posts `input` by the user `writer` on the item `itemID`, checked as a body.
    public func post(
        on itemID: CatalogID, by writer: CatalogID, _ input: CommentInput, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        guard let values = readValues(input, ResourceSchema.comment.creation, failing: completion) else { return }
        post(on: itemID, by: writer, values, options: options, completion: completion)
    }

    /// Inserts a comment on `itemID` by `writer` (a user, or only a name for comments
    /// without accounts) created at `time`, updating its parent's reply count (a change
    /// of the parent) when `countsReply`.
    func insert(
        _ db: any SQLConnection, _ values: FieldValues, on itemID: CatalogID, writer: (id: CatalogID?, name: String), at time: Int64,
        countsReply: Bool = true
    ) throws -> RenderedResource {
        guard try db.exists("SELECT 1 FROM playable_items WHERE id = ?", [itemID.rawValue]) else { throw StoreError.notFound }
        let parentID = values[column: "parent_id"]?.text
        if let parentID, let field = values.field(column: "parent_id") {
            try Self.checkParent(db, parentID, itemID: itemID, pointer: field.pointer)
        }
        let id = CatalogID()
        let arguments: SQLArguments =
            [id.rawValue, itemID.rawValue] + resources.arguments(values, creationMembers)
            + [time, time, 1, writer.id?.rawValue, writer.name]
        let created = try resources.renderWritten(db, insertSQL, arguments)
        if let parentID, countsReply {
            try db.execute(
                """
                UPDATE comments SET reply_count = reply_count + 1, version = version + 1, updated_at = \(db.dialect.greatest)(?, created_at) WHERE id = ?
                """, [time, parentID])
        }
        return created
    }

    /// Checks that `parentID` is a live top-level comment on the item `itemID`.
    private static func checkParent(_ db: any SQLConnection, _ parentID: String, itemID: CatalogID, pointer: String) throws {
        // The parent is locked: its reply count changes, and it must not become a tombstone meanwhile.
        let parent = try db.fetchRow("SELECT playable_item_id, parent_id, deleted FROM comments WHERE id = ?" + db.dialect.forUpdate, [parentID])
        let violation: Violation? =
            if let parent {
                if parent[0].string != itemID.rawValue {
                    Violation(.notFound, "No comment with this id is on this playable item.")
                } else if parent[1] != .null {
                    Violation(.invalidParent, "Replies cannot be replied to; reply to the comment they answer.")
                } else if parent[2].bool {
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
    public func delete(
        _ id: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        resources.submit(options, atomic: true, completion) { db in
            // A reply locks its parent first, then itself: the order every writer of a thread takes.
            let parentID = try db.fetchValue("SELECT parent_id FROM comments WHERE id = ?", [id.rawValue]).string
            if let parentID { _ = try db.exists("SELECT 1 FROM comments WHERE id = ?" + db.dialect.forDelete, [parentID]) }
            let row = try db.fetchRow("SELECT version, parent_id, reply_count, deleted FROM comments WHERE id = ?" + db.dialect.forDelete, [id.rawValue])
            try preconditions.check(current: row?[0].int)
            guard let row else { throw StoreError.notFound }
            let now = Timestamp.milliseconds(Date())
            let greatest = db.dialect.greatest
            if row[2].int ?? 0 > 0 {
                guard !row[3].bool else { return }
                try db.execute(
                    """
                    UPDATE comments SET deleted = 1, body = NULL, version = version + 1, updated_at = \(greatest)(?, created_at) WHERE id = ?
                    """, [now, id.rawValue])
                return
            }
            try db.execute("DELETE FROM comments WHERE id = ?", [id.rawValue])
            if let parentID = row[1].string {
                try db.execute(
                    """
                    UPDATE comments SET reply_count = reply_count - 1, version = version + 1, updated_at = \(greatest)(?, created_at) WHERE id = ?
                    """, [now, parentID])
                try db.execute("DELETE FROM comments WHERE id = ? AND deleted = 1 AND reply_count = 0", [parentID])
            }
        }
    }
}
