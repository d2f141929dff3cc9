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
    static let configuration = CommandConfiguration(
        abstract: "You (the user of --api-key): your profile, your progress in an item, your \"Continue watching\".",
        subcommands: [Show.self, Progress.self, Continue.self], defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show your profile.")
        @OptionGroup var connection: Connection

        func run() async throws {
            try await Output.run {
                try Output.one(try await connection.client().me(), connection: connection) { user in
                    [
                        ("id", user.id.rawValue), ("displayName", user.displayName), ("email", user.email ?? ""),
                        ("avatarURL", user.avatarURL?.absoluteString ?? ""), ("role", user.role?.rawValue ?? ""), ("version", "\(user.version)"),
                    ]
                }
            }
        }
    }

    struct Progress: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show your progress in an item, or, with --position, record where you are now (as a player's heartbeat from this device).")
        @OptionGroup var connection: Connection
        @Argument(help: "The playable item's id.") var item: String
        @Option(help: "Where you are, in seconds.") var position: Double?
        @Option(help: "The item's running time, in seconds, when the item does not say.") var duration: Double?
        @Flag(help: "Mark the item played.") var played = false
        @Option(help: "This device's id.") var device = "catalog-cli"

        func run() async throws {
            let item = try Output.id(item)
            try await Output.run {
                let progress = try connection.client().progress
                if let position {
                    let heartbeat = ProgressInput(
                        positionSeconds: position, durationSeconds: duration, clientTime: Date(), deviceId: device, played: played ? true : nil)
                    try Output.json(try await progress.record(heartbeat, for: item))
                } else if let found = try await progress.get(item) {
                    try Output.json(found)
                } else {
                    FileHandle.standardError.write(Data("catalog: you have no progress in this item\n".utf8))
                    throw ExitCode.failure
                }
            }
        }
    }

    struct Continue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your \"Continue watching\": items begun and not finished, most recent first.")
        @OptionGroup var connection: Connection
        @Option(help: "Items per page (1…100).") var limit: Int?
        @Option(help: "Continue after this cursor (the nextCursor of a previous page).") var cursor: String?

        func run() async throws {
            try await Output.run {
                let page = try await connection.client().progress.continueWatching(limit: limit, cursor: cursor)
                if connection.table {
                    Output.table(
                        ["id", "title", "position", "duration"],
                        page.items.map { entry in
                            [
                                entry.playableItem.id.rawValue, entry.playableItem.title, String(Int(entry.progress.positionSeconds)),
                                entry.progress.durationSeconds.map { String(Int($0)) } ?? "",
                            ]
                        })
                    if let next = page.nextCursor { print("next page: --cursor \(next)") }
                } else {
                    try Output.json(page)
                }
            }
        }
    }
}
