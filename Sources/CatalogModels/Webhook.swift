import Foundation

/// What happened, as a webhook message's `type` names it: a catalog change
/// (`game.created`, `playableItem.updated`, `comment.deleted`, …, one of each for every
/// kind of ``ChangeType``) or a hosted video's outcome (`video.ready`, `video.failed`).
public enum WebhookEventType {
    /// The name an endpoint subscribes with to every event, those added later included.
    public static let everything = "*"
    /// What happens to a resource.
    public static let actions = ["created", "updated", "deleted"]
    /// Every event name, in a stable order.
    public static let all: [String] = ChangeType.allCases.flatMap { type in actions.map { "\(type.rawValue).\($0)" } } + ["video.ready", "video.failed"]

    /// Whether an endpoint subscribed to `subscribed` receives `event`.
    public static func matches(_ subscribed: [String], _ event: String) -> Bool {
        subscribed.contains(everything) || subscribed.contains(event)
    }
}

/// What a webhook endpoint's documents say, and the rules its inputs keep.
public enum WebhookRules {
    /// The most endpoints a catalog keeps.
    public static let maxEndpoints = 100
    /// The most event names one endpoint lists.
    public static let maxEventTypes = 64
    /// A description's length.
    public static let descriptionLength = 0...500
    /// How long a rotated-out secret still signs by default (both signatures are sent
    /// meanwhile), and the longest overlap that may be asked.
    public static let defaultOverlapSeconds = 86_400
    public static let maxOverlapSeconds = 7 * 86_400
    /// The prefix of every signing secret (Standard Webhooks).
    public static let secretPrefix = "whsec_"

    /// The rule `description` keeps.
    public static let descriptionRule = FieldRule<String>.text(length: descriptionLength, multiline: true)

    /// Why `names` cannot be an endpoint's `eventTypes` (one error each, at `pointer/index`).
    public static func eventTypeErrors(_ names: [String], at pointer: String) -> [FieldError] {
        if names.isEmpty { return [Violation(.tooShort, "Must name at least one event type, or \"*\" for all.").at(pointer)] }
        if names.count > maxEventTypes { return [Violation(.tooLong, "Must name at most \(maxEventTypes) event types.").at(pointer)] }
        return names.enumerated().compactMap { index, name in
            name == WebhookEventType.everything || WebhookEventType.all.contains(name)
                ? nil
                : Violation(.invalidFormat, "Not an event type: \"*\" or one of \(WebhookEventType.all.joined(separator: ", ")).").at("\(pointer)/\(index)")
        }
    }

    /// Why `url` cannot be an endpoint's address, if it cannot: an absolute `http` or
    /// `https` URL with a host, no user name or password, no fragment, at most
    /// ``Rules/maxURLLength`` characters. (Which addresses it may reach is the server's
    /// to decide, when it resolves the name at each attempt.)
    public static func urlViolation(_ url: String) -> Violation? {
        switch Rules.parseWebURL(url) {
        case let .failure(violation): return violation
        case let .success(parsed):
            if parsed.user != nil || parsed.password != nil {
                return Violation(.invalidURL, "Must not hold a user name or password: receivers check the signature instead.")
            }
            if parsed.fragment != nil { return Violation(.invalidURL, "Must not have a fragment.") }
            return nil
        }
    }
}

/// An endpoint the catalog sends signed webhook messages to (`/v1/webhooks`, admins only).
public struct Webhook: Codable, Sendable, Hashable, Identifiable {
    /// The server-generated identifier.
    public var id: CatalogID
    /// Where messages are `POST`ed.
    public var url: String
    /// The events it receives (names from ``WebhookEventType``, or `*`).
    public var eventTypes: [String]
    /// What it is for.
    public var description: String
    /// Whether messages are made and sent for it. An endpoint failing for three days is
    /// disabled by the server (``disabledReason`` says so); its undelivered messages wait.
    public var enabled: Bool
    /// Why the server disabled it, when it did.
    public var disabledReason: String?
    /// When it was disabled, when it is.
    public var disabledAt: Date?
    /// Since when every attempt has failed, while they do.
    public var failingSince: Date?
    /// The signing secret (`whsec_…`): only in the answers that make one (creation and
    /// rotation), never again.
    public var secret: String?
    /// Until when the secret before the last rotation still signs too.
    public var previousSecretExpiresAt: Date?
    /// How many messages wait to be delivered.
    public var pending: Int
    /// How many messages were dropped unsent because too many waited (the oldest go first).
    public var dropped: Int
    /// When it was created.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date
    /// Increases by one on every change; the `ETag` is this number in quotes.
    public var version: Int

    /// Creates an endpoint value.
    public init(
        id: CatalogID, url: String, eventTypes: [String], description: String = "", enabled: Bool = true, disabledReason: String? = nil,
        disabledAt: Date? = nil, failingSince: Date? = nil, secret: String? = nil, previousSecretExpiresAt: Date? = nil, pending: Int = 0,
        dropped: Int = 0, createdAt: Date, updatedAt: Date, version: Int
    ) {
        self.id = id
        self.url = url
        self.eventTypes = eventTypes
        self.description = description
        self.enabled = enabled
        self.disabledReason = disabledReason
        self.disabledAt = disabledAt
        self.failingSince = failingSince
        self.secret = secret
        self.previousSecretExpiresAt = previousSecretExpiresAt
        self.pending = pending
        self.dropped = dropped
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }
}

/// The body of `POST /v1/webhooks`, and (every member optional) of its merge patch.
public struct WebhookInput: Codable, Sendable, Hashable, Validatable {
    /// Where messages go: ``WebhookRules/urlViolation(_:)``.
    public var url: String
    /// `["*"]` (every event) when absent.
    public var eventTypes: [String]?
    /// Empty when absent.
    public var description: String?
    /// `true` when absent.
    public var enabled: Bool?

    /// Creates an input value.
    public init(url: String, eventTypes: [String]? = nil, description: String? = nil, enabled: Bool? = nil) {
        self.url = url
        self.eventTypes = eventTypes
        self.description = description
        self.enabled = enabled
    }

    /// Every rule the input breaks.
    public func validationErrors() -> [FieldError] {
        var errors: [FieldError] = []
        if let violation = WebhookRules.urlViolation(url) { errors.append(violation.at("/url")) }
        if let eventTypes { errors += WebhookRules.eventTypeErrors(eventTypes, at: "/eventTypes") }
        if let description { errors.check(description, WebhookRules.descriptionRule, at: "/description") }
        return errors
    }
}

/// The answer to `POST /v1/webhooks/{id}/rotate-secret`: the new secret, shown this once.
public struct WebhookSecret: Codable, Sendable, Hashable {
    /// The new signing secret (`whsec_…`).
    public var secret: String
    /// Until when the previous secret signs too (absent when the overlap asked was 0).
    public var previousSecretExpiresAt: Date?

    /// Creates a value.
    public init(secret: String, previousSecretExpiresAt: Date?) {
        self.secret = secret
        self.previousSecretExpiresAt = previousSecretExpiresAt
    }
}

/// Where a message stands with one endpoint.
public enum WebhookDeliveryStatus: String, Codable, Sendable, Hashable, CaseIterable {
    /// Not delivered yet: an attempt is due at ``WebhookDelivery/nextAttemptAt``.
    case pending
    /// An attempt got a 2xx answer.
    case delivered
    /// Every attempt failed for three days (or the endpoint is gone): no more are made,
    /// unless it is retried by hand.
    case failed
    /// Dropped unsent: too many messages waited for the endpoint.
    case dropped
}

/// One try at delivering a message.
public struct WebhookAttempt: Codable, Sendable, Hashable {
    /// When it started.
    public var at: Date
    /// The answer's status, when one came.
    public var statusCode: Int?
    /// How long it took, in milliseconds.
    public var durationMilliseconds: Int
    /// Why it failed, when it did (a timeout, a refused address, a status outside 2xx).
    public var error: String?
    /// The start of the answer's body (at most 4 KiB, as text).
    public var response: String?

    /// Creates an attempt value.
    public init(at: Date, statusCode: Int?, durationMilliseconds: Int, error: String?, response: String?) {
        self.at = at
        self.statusCode = statusCode
        self.durationMilliseconds = durationMilliseconds
        self.error = error
        self.response = response
    }
}

/// A message on its way to one endpoint (`GET /v1/webhooks/{id}/deliveries`).
public struct WebhookDelivery: Codable, Sendable, Hashable, Identifiable {
    /// The delivery's id.
    public var id: CatalogID
    /// The endpoint's id.
    public var webhookId: CatalogID
    /// The message's `webhook-id`: the same on every attempt (and for every endpoint), so
    /// receivers can drop what they have seen.
    public var messageId: String
    /// The message's `type`.
    public var eventType: String
    public var status: WebhookDeliveryStatus
    /// How many attempts were made.
    public var attemptCount: Int
    /// When the next attempt is due, while one is.
    public var nextAttemptAt: Date?
    /// The latest attempt, when there was one.
    public var lastAttempt: WebhookAttempt?
    /// Every attempt, oldest first (only when one delivery is asked for).
    public var attempts: [WebhookAttempt]?
    /// The message as sent (only when one delivery is asked for).
    public var payload: WebhookMessage?
    /// When the message was made.
    public var createdAt: Date

    /// Creates a delivery value.
    public init(
        id: CatalogID, webhookId: CatalogID, messageId: String, eventType: String, status: WebhookDeliveryStatus, attemptCount: Int,
        nextAttemptAt: Date? = nil, lastAttempt: WebhookAttempt? = nil, attempts: [WebhookAttempt]? = nil, payload: WebhookMessage? = nil, createdAt: Date
    ) {
        self.id = id
        self.webhookId = webhookId
        self.messageId = messageId
        self.eventType = eventType
        self.status = status
        self.attemptCount = attemptCount
        self.nextAttemptAt = nextAttemptAt
        self.lastAttempt = lastAttempt
        self.attempts = attempts
        self.payload = payload
        self.createdAt = createdAt
    }
}

/// The body of a webhook message, as receivers get it (signed as Standard Webhooks say):
///
/// ```json
/// {"data":{"id":"…","resource":{…},"type":"game","version":2},"timestamp":"2026-11-29T10:00:00.123Z","type":"game.updated"}
/// ```
///
/// `data` is the change as the change feed shows it to an admin: for an upsert, the
/// resource as it stood when the message was made (normally the version the change made;
/// if it changed again within those milliseconds, the newer state, whose own message
/// follows); for a deletion, `deleted` and the version. A `video.*` message carries the
/// playable item, whose `video` member tells the outcome.
public struct WebhookMessage: Codable, Sendable, Hashable {
    /// The event (``WebhookEventType``).
    public var type: String
    /// When the change was committed.
    public var timestamp: Date
    /// The change.
    public var data: Change

    /// Creates a message value.
    public init(type: String, timestamp: Date, data: Change) {
        self.type = type
        self.timestamp = timestamp
        self.data = data
    }
}
