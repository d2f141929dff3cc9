import Foundation

/// What a caller may do. Each role includes the ones before it: a `member` has its own
/// profile, comments, playlists and API keys; an `editor` also writes the catalog and
/// moderates every comment and playlist; an `admin` also manages users and every key,
/// imports, backups and metrics. A caller without a credential only reads.
public enum Role: String, Codable, Sendable, Hashable, CaseIterable, Comparable {
    case member, editor, admin

    /// Whether `lhs` grants less than `rhs`.
    public static func < (lhs: Role, rhs: Role) -> Bool {
        allCases.firstIndex(of: lhs) ?? 0 < allCases.firstIndex(of: rhs) ?? 0
    }

    /// The rule a role's name keeps.
    public static let rule = FieldRule<String>.oneOf(allCases.map(\.rawValue))
}

/// A user: a profile, with the role that decides what its credentials may do.
public struct User: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier.
    public var id: CatalogID
    /// The name shown with the user's comments (1…50 characters).
    public var displayName: String
    /// The picture, an https URL.
    public var avatarURL: URL?
    /// The avatar uploaded for it (`PUT /v1/users/{id}/image`), when there is one.
    public var image: ImageReference?
    /// The email address; shown only to the user and to admins.
    public var email: String?
    /// What the user may do; shown only to the user and to admins (`nil` to others, so
    /// that nobody can list the admins).
    public var role: Role?
    /// When the account was created.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date
    /// Increases by one on every change; the `ETag` is this number in quotes.
    public var version: Int

    /// Creates a user value.
    public init(
        id: CatalogID, displayName: String, avatarURL: URL? = nil, image: ImageReference? = nil, email: String? = nil, role: Role?, createdAt: Date, updatedAt: Date,
        version: Int
    ) {
        self.id = id
        self.displayName = displayName
        self.avatarURL = avatarURL
        self.image = image
        self.email = email
        self.role = role
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }
}

/// The body of `POST /v1/users` (admins): a profile and its role.
public struct UserInput: Codable, Sendable, Hashable, Validatable {
    /// 1…50 characters.
    public var displayName: String
    /// An https URL, at most 2,048 characters.
    public var avatarURL: String?
    /// An email address, at most 254 bytes.
    public var email: String?
    /// `member` when absent.
    public var role: Role?

    /// The allowed display name length.
    public static let displayNameLength = 1...50
    /// The rule `displayName` keeps.
    public static let displayNameRule = FieldRule<String>.text(length: displayNameLength)
    /// The rule `avatarURL` keeps.
    public static let avatarURLRule = FieldRule<String>.httpsURL
    /// The rule `email` keeps.
    public static let emailRule = FieldRule<String>.email

    /// Creates an input value.
    public init(displayName: String, avatarURL: String? = nil, email: String? = nil, role: Role? = nil) {
        self.displayName = displayName
        self.avatarURL = avatarURL
        self.email = email
        self.role = role
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(displayName, Self.displayNameRule, at: "/displayName")
        if let avatarURL { errors.check(avatarURL, Self.avatarURLRule, at: "/avatarURL") }
        if let email { errors.check(email, Self.emailRule, at: "/email") }
        return errors
    }
}

/// An API key as listed: never its secret, which only the response creating it shows.
public struct APIKey: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier (not the secret).
    public var id: CatalogID
    /// The user whose key it is.
    public var userId: CatalogID
    /// What it is for (1…100 characters).
    public var name: String
    /// What it may do: never more than its user may.
    public var role: Role
    /// The first characters of the secret, to recognise the key by.
    public var prefix: String
    /// When it stops working, if ever.
    public var expiresAt: Date?
    /// When it was last used (recorded at most once a minute).
    public var lastUsedAt: Date?
    /// When it was created.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date
    /// Increases by one on every change.
    public var version: Int

    /// Creates a key value.
    public init(
        id: CatalogID, userId: CatalogID, name: String, role: Role, prefix: String, expiresAt: Date? = nil, lastUsedAt: Date? = nil,
        createdAt: Date, updatedAt: Date, version: Int
    ) {
        self.id = id
        self.userId = userId
        self.name = name
        self.role = role
        self.prefix = prefix
        self.expiresAt = expiresAt
        self.lastUsedAt = lastUsedAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }
}

/// The answer to `POST /v1/api-keys`: the key and, this once, its secret.
public struct CreatedAPIKey: Codable, Sendable, Hashable {
    /// The key as listings show it.
    public var key: APIKey
    /// The secret to send as `Authorization: Bearer …`. The server keeps only its hash.
    public var secret: String

    private enum CodingKeys: String, CodingKey { case secret }

    /// Decodes the key's members and `secret` from one object.
    public init(from decoder: any Decoder) throws {
        key = try APIKey(from: decoder)
        secret = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .secret)
    }

    /// Encodes the key's members and `secret` into one object.
    public func encode(to encoder: any Encoder) throws {
        try key.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(secret, forKey: .secret)
    }
}

/// The body of `POST /v1/api-keys`.
public struct APIKeyInput: Codable, Sendable, Hashable, Validatable {
    /// What the key is for: 1…100 characters.
    public var name: String
    /// `member` when absent; never above the caller's role.
    public var role: Role?
    /// When the key stops working; never, when absent.
    public var expiresAt: Date?
    /// The user the key is for (admins only); the caller when absent.
    public var userId: CatalogID?

    /// The allowed name length.
    public static let nameLength = 1...100
    /// The rule `name` keeps.
    public static let nameRule = FieldRule<String>.text(length: nameLength)

    /// Creates an input value.
    public init(name: String, role: Role? = nil, expiresAt: Date? = nil, userId: CatalogID? = nil) {
        self.name = name
        self.role = role
        self.expiresAt = expiresAt
        self.userId = userId
    }

    /// Every rule this input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        errors.check(name, Self.nameRule, at: "/name")
        return errors
    }
}
