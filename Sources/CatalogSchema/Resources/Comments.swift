import CatalogModels

extension ResourceSchema {
    /// Comments on playable items, with one level of replies, written by their author (the
    /// caller who posts them): posted at
    /// `/v1/playable-items/{id}/comments`, read and edited at `/v1/comments/{id}`. A
    /// deleted comment with replies stays as a tombstone (no body, `deleted`), which
    /// cannot be edited.
    package static let comment = ResourceSchema(
        type: "comment", noun: "comment", path: "/v1/comments", standardRoutes: false, table: "comments",
        fields: [
            .server("playableItemId", .column("playable_item_id"), .id(references: .playableItems), import: .identity),
            // The author's display name, copied from the account (which may be gone).
            .server("author", .column("author"), .text(CommentInput.authorRule), import: .data),
            .owner("authorId", column: "author_id"),
            SchemaField("authorDeleted", .column("author_deleted"), .boolean, access: .serverSet, required: false, default: .integer(0)),
            .text("body", rule: CommentInput.bodyRule, nullable: true),
            SchemaField(
                "parentId", .column("parent_id"), .id(references: .comments), access: .createOnly, required: false, nullable: true,
                import: .identity),
            .server("deleted", .column("deleted"), .boolean, import: .data),
            // Counted again by every import; the record's count is checked by the rules below.
            .server("replyCount", .column("reply_count"), .integer(FieldRule { _ in nil }), import: .insertOnly),
        ],
        scopes: [.commentsOn, .repliesTo],
        ownership: Ownership(owner: "author_id"),
        frozen: (column: "deleted", detail: "The comment was deleted and cannot be edited."),
        recordRules: { record in
            var errors: [FieldError] = []
            let deleted = record["deleted"] == .integer(1)
            let hasBody = record["body"].map { $0 != .null } ?? false
            if deleted == hasBody {
                errors.append(Violation(.invalidFormat, "A deleted comment has no body; any other comment has one.").at("/body"))
            }
            let replies = record["replyCount"]?.integer ?? 0
            let isReply = record["parentId"].map { $0 != .null } ?? false
            if replies < 0 || (isReply && replies != 0) {
                errors.append(Violation(.outOfRange, "Must be 0 for a reply, and never negative.").at("/replyCount"))
            }
            return errors
        })
}

extension ResourceSchema {
    /// The columns that record a comment's writer: the user, the name shown (theirs when
    /// writing, kept up to date), and whether their account is gone.
    package static let commentWriter = (user: "author_id", name: "author", gone: "author_deleted")
}

extension ScopeKind {
    /// The top-level comments on a playable item (which must exist).
    public static let commentsOn = ScopeKind(
        name: "commentsOn", filter: "t.playable_item_id = ? AND t.parent_id IS NULL",
        parentTable: "playable_items")
    /// The replies to a comment (which must exist).
    public static let repliesTo = ScopeKind(name: "repliesTo", filter: "t.parent_id = ?", parentTable: "comments")
}
