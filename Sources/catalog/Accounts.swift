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
        abstract:
            "You (the user of --api-key): your profile, your progress in an item, your \"Continue watching\" and \"Up next\", favorites, ratings, and everything held about you.",
        subcommands: [Show.self, Progress.self, Continue.self, UpNext.self, Favorites.self, Favorite.self, Rate.self, Export.self],
        defaultSubcommand: Show.self)

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

    struct UpNext: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "up-next", abstract: "List your \"Up next\": in each playlist you are going through, the entry after the last you finished.")
        @OptionGroup var connection: Connection
        @Option(help: "At most this many playlists (1…100).") var limit: Int?

        func run() async throws {
            try await Output.run {
                let entries = try await connection.client().progress.upNext(limit: limit)
                if connection.table {
                    Output.table(
                        ["playlist", "position", "id", "title"],
                        entries.map { [$0.playlist.title, String($0.next.position), $0.next.playableItem.id.rawValue, $0.next.playableItem.title] })
                } else {
                    try Output.json(entries)
                }
            }
        }
    }

    struct Favorites: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your favorites, most recent first.")
        @OptionGroup var connection: Connection
        @Option(help: "Only this kind: playable-items, games or playlists.") var type: String?
        @Option(help: "Favorites per page (1…100).") var limit: Int?
        @Option(help: "Continue after this cursor (the nextCursor of a previous page).") var cursor: String?

        func run() async throws {
            let kind = try type.map(Favorite.kind)
            try await Output.run {
                let page = try await connection.client().viewer.favorites(kind, limit: limit, cursor: cursor)
                if connection.table {
                    Output.table(
                        ["type", "id", "name"],
                        page.items.map { [$0.type.pathSegment, $0.id.rawValue, $0.playableItem?.title ?? $0.game?.name ?? $0.playlist?.title ?? ""] })
                    if let next = page.nextCursor { print("next page: --cursor \(next)") }
                } else {
                    try Output.json(page)
                }
            }
        }
    }

    struct Favorite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a resource one of your favorites, or with --remove, no longer one.")
        @OptionGroup var connection: Connection
        @Argument(help: "The kind: playable-items, games or playlists.") var type: String
        @Argument(help: "The resource's id.") var id: String
        @Flag(help: "Remove it from your favorites.") var remove = false

        static func kind(_ text: String) throws -> FavoriteType {
            guard let kind = FavoriteType(pathSegment: text) else {
                throw ValidationError("'\(text)' is not a kind of favorite: playable-items, games or playlists")
            }
            return kind
        }

        func run() async throws {
            let (kind, id) = (try Self.kind(type), try Output.id(id))
            try await Output.run {
                let viewer = try connection.client().viewer
                if remove { try await viewer.removeFavorite(kind, id) } else { try await viewer.addFavorite(kind, id) }
            }
        }
    }

    struct Rate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Rate an item like, dislike or none (taking a rating back).")
        @OptionGroup var connection: Connection
        @Argument(help: "The playable item's id.") var item: String
        @Argument(help: "like, dislike or none.") var rating: String

        func run() async throws {
            let item = try Output.id(item)
            guard let rating = Rating(rawValue: rating) else { throw ValidationError("'\(rating)' is not a rating: like, dislike or none") }
            try await Output.run { try Output.json(try await connection.client().viewer.rate(item, rating)) }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print everything the catalog holds about you, as NDJSON (profile, keys' metadata, comments, playlists, progress, favorites, ratings, views).")
        @OptionGroup var connection: Connection

        func run() async throws {
            try await Output.run { FileHandle.standardOutput.write(try await connection.client().viewer.export()) }
        }
    }
}
