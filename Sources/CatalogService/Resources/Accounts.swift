import CatalogIdentity
import CatalogModels
import CatalogSchema
import CatalogStore
import HTTPServer

/// Users and API keys: `/v1/users` (admins; anyone reads a public profile), `/v1/me`
/// (the caller's own profile) and `/v1/api-keys` (the caller's keys; admins see and
/// revoke every key). Changes that alter what a credential may do — a role, a revoked
/// key, a deleted account — are forgotten by the ``Authenticator`` before they are
/// answered, so the next request sees them.
struct Accounts: Sendable {
    let store: AccountStore
    let users: ResourceEndpoints
    let keys: ResourceEndpoints
    let authenticator: Authenticator
    /// What removes a deleted account's avatar.
    let imageSweep: ImageSweep
    /// What `PATCH /v1/me` accepts: the profile, not the role.
    private let profile: DocumentShape

    init(_ catalog: CatalogStore, metrics: Metrics, authenticator: Authenticator, imageSweep: ImageSweep) {
        self.imageSweep = imageSweep
        store = catalog.accounts
        self.authenticator = authenticator
        var users = ResourceEndpoints(catalog.accounts.users, catalog: catalog, metrics: metrics)
        // A user's email is for the user and admins.
        guard let publicFields = catalog.accounts.users.mask(Set(catalog.accounts.users.fieldNames).subtracting(ResourceSchema.privateUserFields)) else {
            preconditionFailure("A user's public fields are fields of the user declaration.")
        }
        users.visibleFields = { caller, id in caller.has(.admin) || caller.is(id) ? .all : publicFields }
        self.users = users
        keys = ResourceEndpoints(catalog.accounts.keys, catalog: catalog, metrics: metrics)
        profile = ResourceSchema.user.edit.excluding(["role"])
    }

    func register(in routes: inout Routes) {
        let user = users.path + "/{id}"
        routes.add(.GET, users.path, .admin, users.list())
        routes.add(.POST, users.path, .admin, users.write(createUser))
        routes.add(.GET, user, .read, caching: .perCaller, users.get)
        routes.add(.PATCH, user, .admin, users.write(patchUser))
        routes.add(.DELETE, user, .admin, users.write { request, _, options, done in try deleteUser(ResourceEndpoints.id(request), request, options, done) })

        routes.add(.GET, "/v1/me", .member, .inline { [users] request, caller in try users.show(caller.user(), request, caller) })
        routes.add(
            .PATCH, "/v1/me", .member,
            users.write { [users, profile] request, caller, options, done in
                try users.patch(caller.user(), request, accepting: profile, options, done)
            })
        routes.add(
            .DELETE, "/v1/me", .member,
            users.write { request, caller, options, done in
                // A weaker key of a stronger user (a member key of an admin) cannot end the account.
                guard caller.hasUsersRole else { throw APIError.forbidden("Deleting an account takes a credential with the account's whole role.") }
                try deleteUser(caller.user(), request, options, done)
            })

        let key = keys.path + "/{id}"
        routes.add(
            .GET, keys.path, .member,
            keys.list(scope: { _, caller throws(APIError) in
                // Keys above the caller's own role are not a member key's to see or revoke.
                caller.has(.admin) ? nil : .keysOf(user: try caller.user(), upTo: caller.role ?? .member)
            }))
        routes.add(.POST, keys.path, .member, replaysAnswers: false, keys.write(createKey))
        routes.add(
            .GET, key, .member,
            .inline { [self] request, caller in
                let id = try ResourceEndpoints.id(request)
                try checkOwnsKey(id, caller)
                return try keys.show(id, request, caller)
            })
        routes.add(.DELETE, key, .member, keys.write(revokeKey))
    }

    // MARK: Users

    private func createUser(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let values = try RequestBody.values(request, ResourceSchema.user.creation, mediaType: RequestBody.json)
        store.users.create(values, options: options) { result in done(result.map { ResourceEndpoints.created($0, in: ResourceSchema.user) }) }
    }

    /// An admin's merge patch of any user, its role included.
    private func patchUser(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try ResourceEndpoints.id(request)
        // The role may have changed: credentials are checked again, from the commit on.
        try users.patch(id, request, accepting: ResourceSchema.user.edit, options.answeredAtCommit) { [authenticator] result in
            guard case .success = result else { return done(result) }
            authenticator.forget(user: id)
            authenticator.afterEveryServerForgets { done(result) }
        }
    }

    private func deleteUser(_ id: CatalogID, _ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let preconditions = try ETag.preconditions(request)
        // Forgotten at the commit, before any later write runs: not once this loop gets to it.
        store.deleteUser(id, preconditions: preconditions, options: options.answeredAtCommit) { [authenticator, imageSweep] result in
            guard case let .success(released) = result else { return done(result.map { _ in HTTPResponse(status: .noContent) }) }
            authenticator.forget(user: id)
            // Its avatar goes now, off the loop (else the next sweep takes it).
            if !released.isEmpty { WorkPool.blocking.submit { imageSweep.removeNow(released) } }
            authenticator.afterEveryServerForgets { done(.success(HTTPResponse(status: .noContent))) }
        }
    }

    // MARK: Keys

    /// Creates a key: a role no higher than the caller's, for the caller or (admins) any user.
    private func createKey(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let user = try caller.user()
        let values = try RequestBody.values(request, ResourceSchema.apiKey.creation, mediaType: RequestBody.json)
        if let role = values["role"]?.text.flatMap(Role.init(rawValue:)), !caller.has(role) {
            throw APIError.forbidden("A key's role cannot be above the caller's (\(caller.role?.rawValue ?? "none")).")
        }
        if let owner = values[column: "user_id"]?.text, owner != user.rawValue, !caller.has(.admin) {
            throw APIError.forbidden("Only admins create keys for other users.")
        }
        // A key that expires cannot make one that outlives it.
        if let limit = caller.keyExpires, (values[column: "expires_at"]?.integer).map({ $0 > limit }) ?? true {
            throw APIError.forbidden("The key used expires; a key it creates must expire no later than \(Timestamp.string(milliseconds: limit)).")
        }
        let secret: APIKeySecret
        do { secret = try APIKeySecret() } catch { throw StoreError.unavailable("No random bytes are available.") }
        store.createKey(values, caller: user, digest: secret.digest, prefix: secret.displayed, options: options) { result in
            done(
                result.map { key in
                    // The secret, this once, as the last member of the key's document.
                    var json = key.json
                    if json.last == UInt8(ascii: "}") { json.removeLast() }
                    json += Array(",\"secret\":\"\(secret.text)\"}".utf8)
                    var response = ResourceEndpoints.created(
                        RenderedResource(id: key.id, version: key.version, json: json),
                        in: ResourceSchema.apiKey)
                    response.cacheControl = "no-store"
                    return response
                })
        }
    }

    /// Revokes a key: the next request with it gets 401.
    private func revokeKey(_ request: HTTPRequest, _ caller: Caller, _ options: WriteOptions, _ done: @escaping Completion) throws {
        let id = try ResourceEndpoints.id(request)
        try checkOwnsKey(id, caller)
        let preconditions = try ETag.preconditions(request)
        // Forgotten at the commit, before any later write runs: not once this loop gets to it.
        store.keys.delete(id, preconditions: preconditions, options: options.answeredAtCommit) { [authenticator] result in
            guard case .success = result else { return done(result.map { HTTPResponse(status: .noContent) }) }
            authenticator.forget(key: id)
            authenticator.afterEveryServerForgets { done(.success(HTTPResponse(status: .noContent))) }
        }
    }

    /// 404 unless the key `id` is the caller's, with a role no higher than the caller's,
    /// or the caller is an admin.
    private func checkOwnsKey(_ id: CatalogID, _ caller: Caller) throws {
        guard !caller.has(.admin) else { return }
        guard let key = try store.owner(ofKey: id), caller.is(key.user), caller.has(key.role) else { throw APIError.notFound }
    }
}
