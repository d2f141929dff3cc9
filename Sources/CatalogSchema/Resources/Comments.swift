import CatalogModels

extension ResourceSchema {
    /// Comments on playable items, with one level of replies: posted at
    /// `/v1/playable-items/{id}/comments`, read and edited at `/v1/comments/{id}`. A
    /// deleted comment with replies stays as a tombstone (no body, `deleted`), which
    /// cannot be edited.
    package static let comment = ResourceSchema(
        type: "comment", noun: "comment", path: "/v1/comments", table: "comments",
        fields: [
            .server("playableItemId", .column("playable_item_id"), .id(references: .playableItems), import: .identity),
            .text("author", rule: CommentInput.authorRule),
            .text("body", rule: CommentInput.bodyRule, nullable: true),
            SchemaField("parentId", .column("parent_id"), .id(references: .comments), access: .createOnly, required: false, nullable: true,
                        import: .identity),
            .server("deleted", .column("deleted"), .boolean, import: .data),
            // Counted again by every import; the record's count is checked by the rules below.
            .server("replyCount", .column("reply_count"), .integer(FieldRule { _ in nil }), import: .insertOnly),
        ],
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
