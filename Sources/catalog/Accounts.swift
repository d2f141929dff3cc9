import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

/// `catalog keys create|list|revoke`: the caller's API keys.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create, list and revoke API keys.", subcommands: [Create.self, List.self, Revoke.self])

    static func columns(_ key: APIKey) -> [String] {
        [
            key.id.rawValue, key.name, key.role.rawValue, key.prefix, key.expiresAt.map { Timestamp.string(from: $0) } ?? "never",
            key.lastUsedAt.map { Timestamp.string(from: $0) } ?? "never",
        ]
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a key and print its secret (shown this once).")
        @OptionGroup var connection: Connection
        @Option(help: "What the key is for.") var name: String
        @Option(help: "member, editor or admin; never above your own (default member).") var role: String?
        @Option(help: "When it stops working (RFC 3339), if ever.") var expiresAt: String?
        @Option(help: "The user it is for (admins only; default you).") var user: String?

        func run() async throws {
            let role = try role.map { text in
                guard let role = Role(rawValue: text) else { throw ValidationError("--role must be member, editor or admin.") }
                return role
            }
            let expires = try expiresAt.map { text in
                guard let date = Timestamp.date(from: text) else { throw ValidationError("--expires-at must be an RFC 3339 date-time.") }
                return date
            }
            let input = APIKeyInput(name: name, role: role, expiresAt: expires, userId: try user.map(Output.id))
            try await Output.run {
                let created = try await connection.client().apiKeys.create(input)
                if connection.table {
                    Output.table(["id", "name", "role", "prefix", "expires", "last used"], [Keys.columns(created.key)])
                    print("secret (shown once): \(created.secret)")
                } else {
                    try Output.json(created)
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your keys (every key, for admins), without their secrets.")
        @OptionGroup var connection: Connection

        func run() async throws {
            try await Output.run {
                var keys: [APIKey] = []
                for try await key in try connection.client().apiKeys.all(ListQuery(limit: 100)) { keys.append(key) }
                if connection.table {
                    Output.table(["id", "name", "role", "prefix", "expires", "last used"], keys.map(Keys.columns))
                } else {
                    try Output.json(Page(items: keys, nextCursor: nil))
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key: the next request with it is refused.")
        @OptionGroup var connection: Connection
        @Argument(help: "The key's id (not its secret).") var id: String

        func run() async throws {
            let id = try Output.id(id)
            try await Output.run { try await connection.client().apiKeys.revoke(id) }
        }
    }
}

/// `catalog me`: the profile of the key's user.
struct Me: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show your profile (the user of --api-key).")
    @OptionGroup var connection: Connection

    func run() async throws {
        try await Output.run {
            try Output.one(try await connection.client().me(), connection: connection) { user in
                [
                    ("id", user.id.rawValue), ("displayName", user.displayName), ("email", user.email ?? ""), ("avatarURL", user.avatarURL?.absoluteString ?? ""),
                    ("role", user.role?.rawValue ?? ""), ("version", "\(user.version)"),
                ]
            }
        }
    }
}
