import CatalogIdentity
import CatalogModels
import CatalogOutbound
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// `/v1/webhooks`: admins manage the endpoints that receive signed messages of changes,
/// look at their deliveries and retry them. Every answer is `no-store` (one holds a
/// secret; all are an admin's). A secret is shown once, in the answer that makes it.
/// Reads that count or gather many rows (the endpoints with their backlogs, deliveries
/// with their attempts) run on the expensive-read pool, never on an event loop.
struct WebhookRoutes: Sendable {
    let store: WebhookStore
    /// What seals secrets; `nil` where none can be kept (replicas without a shared key file).
    let secrets: WebhookSecrets?
    /// What a literal address in a URL is checked against when it is given (names are
    /// checked at each attempt).
    let policy: AddressPolicy
    /// What sends: woken when something is due at once.
    let worker: WebhookWorker?

    static let path = "/v1/webhooks"

    func register(in routes: inout Routes) {
        let one = Self.path + "/{id}", deliveries = one + "/deliveries", delivery = deliveries + "/{deliveryId}"
        routes.add(
            .GET, Self.path, .admin, caching: .noStore,
            .read(isExpensive: Self.always) { [store] request, _ in
                _ = try QueryParameters.parse(request, accepted: [])
                return try Self.json(Page(items: try store.list(), nextCursor: nil))
            })
        routes.add(.POST, Self.path, .admin, caching: .noStore, replaysAnswers: false, .later { [self] request, _, options, done in try create(request, options, done) })
        routes.add(
            .GET, one, .admin, caching: .noStore,
            .inline { [store] request, _ in
                _ = try QueryParameters.parse(request, accepted: [])
                guard let row = try store.row(try ResourceEndpoints.id(request)) else { throw APIError.notFound }
                return try Self.json(row.webhook, tag: row.version)
            })
        routes.add(.PATCH, one, .admin, caching: .noStore, .later { [self] request, _, options, done in try patch(request, options, done) })
        routes.add(
            .DELETE, one, .admin, caching: .noStore,
            .later { [store, worker] request, _, options, done in
                store.delete(try ResourceEndpoints.id(request), preconditions: try ETag.preconditions(request), options: options) { result in
                    if case .success = result { worker?.wake() }
                    done(result.map { HTTPResponse(status: .noContent) })
                }
            })
        routes.add(
            .POST, one + "/rotate-secret", .admin, caching: .noStore, replaysAnswers: false,
            .later { [self] request, _, options, done in try rotate(request, options, done) })
        routes.add(
            .GET, deliveries, .admin, caching: .noStore,
            .read(isExpensive: Self.always) { [store] request, _ in
                let webhook = try ResourceEndpoints.id(request)
                let values = try QueryParameters.parse(request, accepted: ["status", "limit", "cursor"])
                let status = try values["status"].map { text throws(APIError) in
                    guard let status = WebhookDeliveryStatus(rawValue: text) else {
                        throw .invalidParameter("status", "must be one of \(WebhookDeliveryStatus.allCases.map(\.rawValue).joined(separator: ", ")).")
                    }
                    return status
                }
                let before = try Self.cursor(ListParameters.cursor(values), status: status)
                guard try store.row(webhook) != nil else { throw APIError.notFound }
                let page = try store.deliveries(of: webhook, status: status, limit: try ListParameters.limit(values), before: before)
                let next = page.next.map { Self.cursor($0, status: status) }
                let link = next.map { ListParameters.nextLink(request, cursor: $0) }
                return try Self.json(Page(items: page.items, nextCursor: next), headers: link.map { [$0] } ?? [])
            })
        routes.add(
            .GET, delivery, .admin, caching: .noStore,
            .read(isExpensive: Self.always) { [store] request, _ in
                _ = try QueryParameters.parse(request, accepted: [])
                guard let (delivery, body) = try store.delivery(try ResourceEndpoints.id(request, "deliveryId"), of: try ResourceEndpoints.id(request)) else {
                    throw APIError.notFound
                }
                var shown = delivery
                shown.payload = try? JSONResponse.decoder.decode(WebhookMessage.self, from: Data(body))
                return try Self.json(shown)
            })
        routes.add(
            .POST, delivery + "/retry", .admin, caching: .noStore,
            .later { [store, worker] request, _, options, done in
                _ = try QueryParameters.parse(request, accepted: [])
                let webhook = try ResourceEndpoints.id(request), id = try ResourceEndpoints.id(request, "deliveryId")
                guard let row = try store.row(webhook) else { throw APIError.notFound }
                guard row.enabled else { throw APIError.webhookDisabled }
                store.retry(id, of: webhook, options: options) { result in
                    if case .success = result { worker?.wake() }
                    done(result.flatMap { delivery in Result { try Self.json(delivery, status: .accepted) } })
                }
            })
    }

    // MARK: Writes

    private func create(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let input = try Self.input(RequestBody.object(request, mediaType: RequestBody.json), patching: nil)
        try check(input)
        guard let secrets else { throw APIError.webhooksUnavailable }
        let id = CatalogID()
        let secret = try secrets.make(for: id)
        let changes = WebhookChanges(
            url: input.url, eventTypes: input.eventTypes ?? [WebhookEventType.everything], description: input.description ?? "", enabled: input.enabled ?? true)
        store.create(id: id, changes, secret: secret.sealed, options: options) { [worker] result in
            if case .success = result { worker?.wake() }
            done(
                result.flatMap { row in
                    var shown = row.webhook
                    shown.secret = secret.text
                    return Result { try Self.json(shown, status: .created, tag: row.version, headers: [("Location", "\(Self.path)/\(row.id)")]) }
                })
        }
    }

    /// A merge patch (RFC 7396) of an endpoint: applied to the endpoint as read, then
    /// written on the condition that it is still that version (read again and applied
    /// anew when another write came between, unless the client's own `If-Match` fails).
    private func patch(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try ResourceEndpoints.id(request)
        let object = try RequestBody.object(request, mediaType: RequestBody.mergePatch)
        try patch(id, object, preconditions: try ETag.preconditions(request), attempts: 3, options, done)
    }

    /// Applies `object` to the endpoint `id` as read now, written on the condition that it
    /// is still that version; read and applied anew (`attempts` times at most) when
    /// another write came between.
    private func patch(
        _ id: CatalogID, _ object: [String: JSONValue], preconditions: WritePreconditions, attempts: Int, _ options: WriteOptions,
        _ done: @escaping Completion
    ) throws {
        guard let current = try store.row(id) else { throw APIError.notFound }
        // A malformed body is refused as such, whatever its preconditions say.
        let input = try Self.input(object, patching: current)
        try check(input)
        try preconditions.check(current: current.version)
        let changes = WebhookChanges(
            url: input.url, eventTypes: input.eventTypes ?? current.eventTypes, description: input.description ?? current.description,
            enabled: input.enabled ?? current.enabled)
        store.update(id, changes, preconditions: WritePreconditions(ifMatch: .versions([current.version])), options: options) { [self] result in
            if case .failure(StoreError.preconditionFailed) = result, attempts > 1 {
                do { return try patch(id, object, preconditions: preconditions, attempts: attempts - 1, options, done) } catch { return done(.failure(error)) }
            }
            if case .success = result { worker?.wake() }
            done(result.flatMap { row in Result { try Self.json(row.webhook, tag: row.version) } })
        }
    }

    private func rotate(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try ResourceEndpoints.id(request)
        var overlap = WebhookRules.defaultOverlapSeconds
        if !request.body.isEmpty {
            let object = try RequestBody.object(request, mediaType: RequestBody.json)
            var errors: [FieldError] = []
            for key in object.keys where key != "overlapSeconds" { errors.append(Violation(.unknownField, "Not a member of this body.").at("/\(key)")) }
            switch object["overlapSeconds"] {
            case nil, .null?: break
            case let .number(value)?:
                if value.rounded() == value, (0...Double(WebhookRules.maxOverlapSeconds)).contains(value) {
                    overlap = Int(value)
                } else {
                    errors.append(Violation(.outOfRange, "Must be a whole number of seconds from 0 to \(WebhookRules.maxOverlapSeconds).").at("/overlapSeconds"))
                }
            case let value?: errors.append(Violation(.invalidType, "Must be an integer, not \(value.typeName).").at("/overlapSeconds"))
            }
            guard errors.isEmpty else { throw APIError.validation(errors) }
        }
        guard let secrets else { throw APIError.webhooksUnavailable }
        guard try store.row(id) != nil else { throw APIError.notFound }
        let secret = try secrets.make(for: id)
        let until = overlap > 0 ? Timestamp.milliseconds(Date()) + Int64(overlap) * 1000 : nil
        store.rotate(id, secret: secret.sealed, previousUntil: until, options: options) { [worker] result in
            if case .success = result { worker?.wake() }
            done(
                result.flatMap { row in
                    Result { try Self.json(WebhookSecret(secret: secret.text, previousSecretExpiresAt: row.previousSecretExpires.map(Timestamp.date(milliseconds:)))) }
                })
        }
    }

    // MARK: Bodies

    /// The input a creation's body (or, with the endpoint it patches, a merge patch's)
    /// holds, checked against ``WebhookInput``'s rules: 422 listing every failing member.
    static func input(_ object: [String: JSONValue], patching current: WebhookRow?) throws(APIError) -> WebhookInput {
        var errors: [FieldError] = []
        func text(_ key: String, nullable: Bool) -> String? {
            switch object[key] {
            case nil: return nil
            case let .string(value)?: return value
            case .null? where nullable: return ""
            case let value?:
                errors.append(Violation(.invalidType, "Must be a string, not \(value.typeName).").at("/\(key)"))
                return nil
            }
        }
        for key in object.keys where !["url", "eventTypes", "description", "enabled"].contains(key) {
            errors.append(Violation(.unknownField, "Not a member of a webhook endpoint's body.").at("/\(key)"))
        }
        let url = text("url", nullable: false)
        if url == nil, current == nil, object["url"] == nil { errors.append(Violation(.required, "Required.").at("/url")) }
        var eventTypes: [String]?
        switch object["eventTypes"] {
        case nil: break
        case .null? where current == nil: break
        case let .array(items)?:
            let names = items.compactMap { item -> String? in if case let .string(name) = item { name } else { nil } }
            if names.count == items.count { eventTypes = names } else { errors.append(Violation(.invalidType, "Must be an array of strings.").at("/eventTypes")) }
        case let value?: errors.append(Violation(.invalidType, "Must be an array of strings, not \(value.typeName).").at("/eventTypes"))
        }
        let description = text("description", nullable: true)
        var enabled: Bool?
        switch object["enabled"] {
        case nil: break
        case .null? where current == nil: break
        case let .bool(value)?: enabled = value
        case let value?: errors.append(Violation(.invalidType, "Must be a boolean, not \(value.typeName).").at("/enabled"))
        }
        let input = WebhookInput(url: url ?? current?.url ?? "", eventTypes: eventTypes, description: description, enabled: enabled)
        errors += input.validationErrors().filter { error in !errors.contains { $0.pointer == error.pointer } }
        guard errors.isEmpty else { throw .validation(errors) }
        return input
    }

    /// Refuses, as a 422 of `/url`, what no attempt could ever reach: plain `http` where
    /// only https goes, and a literal address the policy refuses.
    private func check(_ input: WebhookInput) throws(APIError) {
        guard let url = URL(string: input.url), let host = url.host else { return }
        let plain = url.scheme?.lowercased() == "http"
        let literal = IPAddress(host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host)
        if plain, policy.plainHTTP.isEmpty {
            throw .validation([Violation(.invalidURL, "Must be an https URL: this server sends plain http nowhere (see --webhook-http-networks).").at("/url")])
        }
        if let literal, let refusal = policy.refusal(literal, plainHTTP: plain) {
            throw .validation([Violation(.invalidURL, "Cannot be reached: \(refusal).").at("/url")])
        }
    }

    // MARK: Answers

    private static func json(
        _ value: some Encodable, status: HTTPStatus = .ok, tag: Int? = nil, headers: [(String, String)] = []
    ) throws -> HTTPResponse {
        var fields = [("Content-Type", JSONResponse.contentType)] + headers
        if let tag { fields.append(("ETag", ETag.header(tag))) }
        return HTTPResponse(status: status, headers: fields, body: Array(try JSONResponse.encoder.encode(value)))
    }

    private static let always: @Sendable (HTTPRequest) -> Bool = { _ in true }

    /// A deliveries page's cursor: where the next page starts (before a delivery's
    /// `seq`), bound to the `status` it lists (`*`: any).
    private static func cursor(_ seq: Int64, status: WebhookDeliveryStatus?) -> String {
        Base64URL.encode(Array("d:\(status?.rawValue ?? "*"):\(seq)".utf8))
    }

    /// The `seq` a cursor made by ``cursor(_:status:)`` for `status` starts before; a
    /// cursor of another status, or none this list made, is a 400.
    private static func cursor(_ text: String?, status: WebhookDeliveryStatus?) throws(APIError) -> Int64? {
        guard let text else { return nil }
        let prefix = "d:\(status?.rawValue ?? "*"):"
        guard let bytes = Base64URL.decode(Array(text.utf8)), let plain = String(validating: bytes, as: UTF8.self) else {
            throw .invalidParameter("cursor", "is not a cursor this list made.")
        }
        guard plain.hasPrefix(prefix), let seq = Int64(plain.dropFirst(prefix.count)), seq > 0 else {
            throw .invalidParameter("cursor", plain.hasPrefix("d:") ? "was made for another status: ask with the status it was made for." : "is not a cursor this list made.")
        }
        return seq
    }
}

extension APIError {
    /// 409: webhooks need a key to seal secrets with, and this server has none it may use.
    static let webhooksUnavailable = APIError(
        status: .conflict, code: "webhooksUnavailable",
        detail: "Webhook secrets cannot be kept: servers sharing a database need the same key, so start each with --webhook-key-file.")
    /// 409: the endpoint is disabled.
    static let webhookDisabled = APIError(
        status: .conflict, code: "webhookDisabled", detail: "The endpoint is disabled: enable it (PATCH {\"enabled\":true}) before retrying its deliveries.")
}
