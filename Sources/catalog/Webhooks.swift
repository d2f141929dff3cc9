import ArgumentParser
import CatalogClient
import CatalogModels
import Foundation

/// `catalog webhooks …` (admins): endpoints that receive signed messages of changes.
struct Webhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage webhook endpoints and look at their deliveries (admins).",
        subcommands: [List.self, Create.self, Show.self, Update.self, Delete.self, RotateSecret.self, Deliveries.self, Retry.self])

    static let headers = ["id", "url", "events", "enabled", "pending", "dropped", "description"]

    static func columns(_ webhook: Webhook) -> [String] {
        [
            webhook.id.rawValue, webhook.url, webhook.eventTypes.joined(separator: ","),
            webhook.enabled ? "yes" : "no" + (webhook.disabledReason.map { " (\($0))" } ?? ""), String(webhook.pending), String(webhook.dropped),
            webhook.description,
        ]
    }

    /// `--events a,b`: the event names, or `*` for all.
    static func events(_ text: String?) -> [String]? {
        text.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    static func show(_ webhook: Webhook, _ connection: Connection) throws {
        if connection.table {
            Output.table(headers, [columns(webhook)])
            if let secret = webhook.secret { print("secret (shown once): \(secret)") }
        } else {
            try Output.json(webhook)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every endpoint.")
        @OptionGroup var connection: Connection

        func run() async throws {
            try await Output.run {
                let webhooks = try await connection.client().webhooks.list()
                if connection.table { Output.table(Webhooks.headers, webhooks.map(Webhooks.columns)) } else { try Output.json(Page(items: webhooks, nextCursor: nil)) }
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an endpoint and print its signing secret (shown this once).")
        @OptionGroup var connection: Connection
        @Argument(help: "Where messages are POSTed (https).") var url: String
        @Option(help: "The event types, comma-separated, such as game.created,video.ready (default *: all).") var events: String?
        @Option(help: "What it is for.") var description: String?
        @Flag(help: "Create it disabled.") var disabled = false

        func run() async throws {
            let input = WebhookInput(url: url, eventTypes: Webhooks.events(events), description: description, enabled: disabled ? false : nil)
            try await Output.run { try Webhooks.show(try await connection.client().webhooks.create(input), connection) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one endpoint.")
        @OptionGroup var connection: Connection
        @Argument(help: "The endpoint's id.") var id: String

        func run() async throws {
            let id = try Output.id(id)
            try await Output.run { try Webhooks.show(try await connection.client().webhooks.get(id).value, connection) }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change an endpoint; enabling a disabled one sends its waiting messages again.")
        @OptionGroup var connection: Connection
        @Argument(help: "The endpoint's id.") var id: String
        @Option(help: "A new address.") var url: String?
        @Option(help: "New event types, comma-separated.") var events: String?
        @Option(help: "A new description.") var description: String?
        @Flag(help: "Enable it.") var enable = false
        @Flag(help: "Disable it.") var disable = false

        func run() async throws {
            guard !(enable && disable) else { throw ValidationError("Give --enable or --disable, not both.") }
            let update = WebhookUpdate(
                url: url, eventTypes: Webhooks.events(events), description: description, enabled: enable ? true : disable ? false : nil)
            let id = try Output.id(id)
            try await Output.run { try Webhooks.show(try await connection.client().webhooks.update(id, update).value, connection) }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an endpoint (its undelivered messages are dropped).")
        @OptionGroup var connection: Connection
        @Argument(help: "The endpoint's id.") var id: String

        func run() async throws {
            let id = try Output.id(id)
            try await Output.run { try await connection.client().webhooks.delete(id) }
        }
    }

    struct RotateSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a new signing secret (shown this once); the old one signs too for the overlap.")
        @OptionGroup var connection: Connection
        @Argument(help: "The endpoint's id.") var id: String
        @Option(help: "Seconds the previous secret keeps signing (default 86400).") var overlap: Int?

        func run() async throws {
            let id = try Output.id(id)
            try await Output.run {
                let secret = try await connection.client().webhooks.rotateSecret(of: id, overlapSeconds: overlap)
                if connection.table {
                    print("secret (shown once): \(secret.secret)")
                    if let until = secret.previousSecretExpiresAt { print("the previous secret signs too until \(Timestamp.string(from: until))") }
                } else {
                    try Output.json(secret)
                }
            }
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List an endpoint's deliveries, newest first.")
        @OptionGroup var connection: Connection
        @Argument(help: "The endpoint's id.") var id: String
        @Option(help: "pending, delivered, failed or dropped.") var status: String?
        @Option(help: "How many (1…100).") var limit: Int?

        func run() async throws {
            let status = try status.map { text in
                guard let status = WebhookDeliveryStatus(rawValue: text) else { throw ValidationError("--status must be pending, delivered, failed or dropped.") }
                return status
            }
            let id = try Output.id(id)
            try await Output.run {
                let page = try await connection.client().webhooks.deliveries(of: id, status: status, limit: limit)
                if connection.table {
                    Output.table(
                        ["id", "message", "event", "status", "attempts", "last status", "error"],
                        page.items.map { delivery in
                            [
                                delivery.id.rawValue, delivery.messageId, delivery.eventType, delivery.status.rawValue, String(delivery.attemptCount),
                                delivery.lastAttempt?.statusCode.map(String.init) ?? "-", delivery.lastAttempt?.error ?? "",
                            ]
                        })
                } else {
                    try Output.json(page)
                }
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send a delivery again now.")
        @OptionGroup var connection: Connection
        @Argument(help: "The endpoint's id.") var id: String
        @Argument(help: "The delivery's id.") var delivery: String

        func run() async throws {
            let id = try Output.id(id), delivery = try Output.id(delivery)
            try await Output.run { try Output.json(try await connection.client().webhooks.retry(delivery, of: id)) }
        }
    }
}
