import CatalogModels
import Foundation

/// `/v1/webhooks` (admins): the endpoints that receive signed messages of the catalog's
/// changes, their deliveries, and retries. An endpoint's secret is in the answers that
/// make one (``create(_:)``, ``rotateSecret(of:overlapSeconds:)``) only.
public struct WebhooksClient: Sendable {
    let client: CatalogClient
    private static let path = "/v1/webhooks"

    /// Every endpoint, oldest first.
    public func list() async throws(CatalogClientError) -> [Webhook] {
        try client.decode(Page<Webhook>.self, from: await client.send("GET", Self.path).data).items
    }

    /// Creates an endpoint; the answer holds its ``Webhook/secret``, which is never shown again.
    public func create(_ input: WebhookInput) async throws(CatalogClientError) -> Webhook {
        try client.decode(Webhook.self, from: await client.send("POST", Self.path, body: client.encode(input), contentType: "application/json").data)
    }

    /// The endpoint `id`, with its `ETag`.
    public func get(_ id: CatalogID) async throws(CatalogClientError) -> Tagged<Webhook> {
        try client.tagged(await client.send("GET", "\(Self.path)/\(id)"))
    }

    /// Changes what `update` sets (a merge patch); with `ifMatch`, only if the endpoint is
    /// still that version. Enabling a disabled endpoint sends its waiting messages again.
    public func update(_ id: CatalogID, _ update: WebhookUpdate, ifMatch: String? = nil) async throws(CatalogClientError) -> Tagged<Webhook> {
        try client.tagged(
            await client.send(
                "PATCH", "\(Self.path)/\(id)", body: client.encode(update), contentType: "application/merge-patch+json", headers: client.condition(ifMatch)))
    }

    /// Deletes the endpoint `id`; its undelivered messages are dropped.
    public func delete(_ id: CatalogID, ifMatch: String? = nil) async throws(CatalogClientError) {
        _ = try await client.send("DELETE", "\(Self.path)/\(id)", headers: client.condition(ifMatch))
    }

    /// Makes a new secret for the endpoint `id`; the one it replaces signs too for
    /// `overlapSeconds` (a day when `nil`), so receivers can switch without losing a message.
    public func rotateSecret(of id: CatalogID, overlapSeconds: Int? = nil) async throws(CatalogClientError) -> WebhookSecret {
        let body = try overlapSeconds.map { seconds throws(CatalogClientError) in try client.encode(["overlapSeconds": seconds]) }
        return try client.decode(
            WebhookSecret.self,
            from: await client.send("POST", "\(Self.path)/\(id)/rotate-secret", body: body, contentType: body == nil ? nil : "application/json").data)
    }

    /// One page of the endpoint's deliveries, newest first (of `status` when given).
    public func deliveries(
        of id: CatalogID, status: WebhookDeliveryStatus? = nil, limit: Int? = nil, cursor: String? = nil
    ) async throws(CatalogClientError) -> Page<WebhookDelivery> {
        var query: [URLQueryItem] = []
        if let status { query.append(URLQueryItem(name: "status", value: status.rawValue)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        return try client.decode(Page<WebhookDelivery>.self, from: await client.send("GET", "\(Self.path)/\(id)/deliveries", query: query).data)
    }

    /// The delivery `delivery` of the endpoint `id`, with every attempt and the message as sent.
    public func delivery(_ delivery: CatalogID, of id: CatalogID) async throws(CatalogClientError) -> WebhookDelivery {
        try client.decode(WebhookDelivery.self, from: await client.send("GET", "\(Self.path)/\(id)/deliveries/\(delivery)").data)
    }

    /// Sends the delivery `delivery` of the endpoint `id` again now (one that ended starts
    /// its retry schedule again).
    public func retry(_ delivery: CatalogID, of id: CatalogID) async throws(CatalogClientError) -> WebhookDelivery {
        try client.decode(WebhookDelivery.self, from: await client.send("POST", "\(Self.path)/\(id)/deliveries/\(delivery)/retry").data)
    }
}

/// What ``WebhooksClient/update(_:_:ifMatch:)`` changes: the members set, the others kept.
public struct WebhookUpdate: Sendable, Encodable {
    public var url: String?
    public var eventTypes: [String]?
    public var description: String?
    public var enabled: Bool?

    /// An update of the members given.
    public init(url: String? = nil, eventTypes: [String]? = nil, description: String? = nil, enabled: Bool? = nil) {
        self.url = url
        self.eventTypes = eventTypes
        self.description = description
        self.enabled = enabled
    }
}
