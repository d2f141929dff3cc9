import Foundation

/// A comment on a playable item, or a reply to one (one level of replies).
public struct Comment: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier.
    public var id: CatalogID
    /// The item commented on.
    public var playableItemId: CatalogID
    /// The comment this replies to; `nil` for a top-level comment.
    public var parentId: CatalogID?
    /// The author's display name when the comment was written or the name last changed;
    /// ``deletedAuthorName`` once the account is deleted.
    public var author: String
    /// The author's user id; `nil` for comments from before accounts, and once the account is deleted.
    public var authorId: CatalogID?
    /// Whether the author deleted their account (the comment stays readable).
    public var authorDeleted: Bool
    /// The text, returned as plain text exactly as given; `nil` once deleted.
    public var body: String?
    /// Whether the comment was deleted but kept, without its body, for its replies.
    public var deleted: Bool
    /// How many replies it has.
    public var replyCount: Int
    /// When the comment was posted.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date
    /// Increases by one on every change; the `ETag` is this number in quotes.
    public var version: Int

    /// Creates a comment value.
    public init(
        id: CatalogID, playableItemId: CatalogID, parentId: CatalogID? = nil, author: String, authorId: CatalogID? = nil,
        authorDeleted: Bool = false, body: String?, deleted: Bool = false, replyCount: Int = 0, createdAt: Date, updatedAt: Date,
        version: Int
    ) {
        self.id = id
        self.playableItemId = playableItemId
        self.parentId = parentId
        self.author = author
        self.authorId = authorId
        self.authorDeleted = authorDeleted
        self.body = body
        self.deleted = deleted
        self.replyCount = replyCount
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }

    private enum CodingKeys: String, CodingKey {
        case id, playableItemId, parentId, author, authorId, authorDeleted, body, deleted, replyCount, createdAt, updatedAt, version
    }

    /// Decodes a comment; exports made before accounts have no `authorDeleted` (false).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(CatalogID.self, forKey: .id)
        playableItemId = try container.decode(CatalogID.self, forKey: .playableItemId)
        parentId = try container.decodeIfPresent(CatalogID.self, forKey: .parentId)
        author = try container.decode(String.self, forKey: .author)
        authorId = try container.decodeIfPresent(CatalogID.self, forKey: .authorId)
        authorDeleted = try container.decodeIfPresent(Bool.self, forKey: .authorDeleted) ?? false
        body = try container.decodeIfPresent(String.self, forKey: .body)
        deleted = try container.decode(Bool.self, forKey: .deleted)
        replyCount = try container.decode(Int.self, forKey: .replyCount)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        updatedAt = try container.decode(Date.self, forKey: .updatedAt)
        version = try container.decode(Int.self, forKey: .version)
    }
}

/// The body of `POST /v1/playable-items/{id}/comments`. The author is the caller.
public struct CommentInput: Codable, Sendable, Hashable, Validatable {
    /// 1…5,000 characters; line breaks allowed.
    public var body: String
    /// The top-level comment this replies to, if any.
    public var parentId: CatalogID?

    /// The allowed length of an author's name (comments from before accounts had up to 100 characters).
    public static let authorLength = 1...100
    /// The allowed body length.
    public static let bodyLength = 1...5000
    /// The rule `author` keeps.
    public static let authorRule = FieldRule<String>.text(length: authorLength)
    /// The rule `body` keeps.
    public static let bodyRule = FieldRule<String>.text(length: bodyLength, multiline: true)

    /// What the author of a deleted account shows as.
    public static let deletedAuthorName = "deleted user"

    /// Creates an input value.
    public init(body: String, parentId: CatalogID? = nil) {
        self.body = body
        self.parentId = parentId
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        CommentEdit(body: body).validationErrors()
    }
}

/// What an edit of a comment sets (`PATCH /v1/comments/{id}`, as a merge patch): its
/// body. Neither the author, the thread nor a deleted comment can be edited.
public struct CommentEdit: Codable, Sendable, Hashable, Validatable {
    /// 1…5,000 characters.
    public var body: String

    /// Creates an edit.
    public init(body: String) {
        self.body = body
    }

    /// Every rule this edit breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(body, CommentInput.bodyRule, at: "/body")
        return errors
    }
}
