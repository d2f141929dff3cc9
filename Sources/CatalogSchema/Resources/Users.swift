import CatalogModels

extension ResourceSchema {
    /// Users: profiles with a role (`/v1/users`, and `/v1/me` for the caller's own). Made
    /// by admins, by the bootstrap command, or on the first valid identity token of an
    /// (issuer, subject) pair, which the table keeps but documents never show.
    package static let user = ResourceSchema(
        type: "user", noun: "user", path: "/v1/users", table: "users",
        fields: [
            .text("displayName", column: "display_name", rule: UserInput.displayNameRule, sortable: true),
            .text("avatarURL", column: "avatar_url", rule: UserInput.avatarURLRule, required: false),
            .text("email", rule: UserInput.emailRule, required: false),
            .choice("role", rule: Role.rule, default: Role.member.rawValue),
        ],
        image: ImageSlot("avatar", setBy: .itself))

    /// The members of a user that only the user and admins see.
    package static let privateUserFields: Set<String> = ["email", "role"]

    /// API keys (`/v1/api-keys`): the secret is never a member, only its first characters
    /// (`prefix`); the table keeps its SHA-256 digest.
    package static let apiKey = ResourceSchema(
        type: "apiKey", noun: "API key", path: "/v1/api-keys", table: "api_keys",
        fields: [
            SchemaField("userId", .column("user_id"), .id(references: nil), access: .createOnly, required: false, nullable: true),
            SchemaField("name", .column("name"), .text(APIKeyInput.nameRule), access: .createOnly),
            .choice("role", rule: Role.rule, access: .createOnly, default: Role.member.rawValue),
            .server("prefix", .column("prefix"), .text(.text(length: 1...64))),
            SchemaField("expiresAt", .column("expires_at"), .timestamp, access: .createOnly, required: false, nullable: true),
            .server("lastUsedAt", .column("last_used_at"), .timestamp),
        ],
        scopes: [.keysOf])
}

extension ScopeKind {
    /// A user's API keys, up to a role.
    public static let keysOf = ScopeKind(name: "keysOf", filter: "t.user_id = ?", boundedByRole: true)
}
