import CatalogClient
import CatalogModels
import CatalogService
import CatalogStore
import Foundation
import GRDB
import ServiceTestSupport
import TestSupport
import Testing

/// Identity tokens from an identity provider, with keys made here: what is accepted,
/// and that each forgery is refused with 401.
@Suite struct IdentityTokenTests {
    static let issuer = "https://id.example.com"
    static let audience = "com.example.catalog"

    /// A catalog trusting `signers`' keys (written to a JWKS file) from ``issuer`` for ``audience``.
    static func catalog(trusting signers: [TokenSigner]) throws -> (TestCatalog, URL) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try TokenSigner.keySet(signers).write(to: file)
        let catalog = try TestCatalog(seed: false) { configuration in
            configuration.identityTokens = IdentityTokenSettings(
                keySetFile: file.path, issuers: ["https://other.example", issuer],
                audiences: [audience])
        }
        return (catalog, file)
    }

    static func claims(
        subject: String = "user-1", issuer: String = issuer, audience: Any = audience, expires: Double = 600, notBefore: Double? = nil,
        email: String? = nil, emailVerified: Any? = nil
    ) -> [String: Any] {
        let now = Date().timeIntervalSince1970
        var claims: [String: Any] = ["iss": issuer, "sub": subject, "aud": audience, "iat": Int(now), "exp": Int(now + expires)]
        if let notBefore { claims["nbf"] = Int(now + notBefore) }
        if let email { claims["email"] = email }
        if let emailVerified { claims["email_verified"] = emailVerified }
        return claims
    }

    static func me(_ catalog: TestCatalog, token: String) async throws -> APIResponse {
        try await catalog.anonymous.get("/v1/me", headers: ["Authorization": "Bearer \(token)"])
    }

    @Test(arguments: TestEngine.all) func validTokensNameOneMemberPerIssuerAndSubject(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let rsa = try await TokenSigner.make(.rsa, kid: "rsa-1"), ec = try await TokenSigner.make(.ec, kid: "ec-1")
            let (catalog, file) = try Self.catalog(trusting: [rsa, ec])
            defer { try? FileManager.default.removeItem(at: file) }
            let first = try await Self.me(catalog, token: rsa.token(Self.claims(email: "ana@example.com", emailVerified: true)))
            #expect(first.status == 200, "\(first.text)")
            let user = try first.decode(User.self)
            #expect(user.role == .member)
            #expect(user.email == "ana@example.com", "the email claim is copied")
            // The same (iss, sub) through the other key and an audience array: the same user.
            let again = try await Self.me(catalog, token: ec.token(Self.claims(audience: ["someone-else", Self.audience])))
            #expect(try again.decode(User.self).id == user.id)
            // Another subject is another user; a token may post as its user.
            let other = try await Self.me(catalog, token: ec.token(Self.claims(subject: "user-2", email: "eve@example.com", emailVerified: false)))
            #expect(try other.decode(User.self).id != user.id)
            #expect(try other.decode(User.self).email == nil, "an email the provider says it did not verify is not copied")
            // Only the JSON value true says it was verified: not a string, a number, or nothing.
            for (index, flag) in ([nil, "true", "False", 0, 1] as [Any?]).enumerated() {
                let claims = Self.claims(subject: "unverified-\(index)", email: "u\(index)@example.com", emailVerified: flag)
                let unverified = try await Self.me(catalog, token: ec.token(claims))
                #expect(try unverified.decode(User.self).email == nil, "email_verified \(String(describing: flag)) is not a verification")
            }
            // Within the 60 s leeway: expired 30 s ago, or valid from 30 s on, still accepted.
            #expect(try await Self.me(catalog, token: rsa.token(Self.claims(expires: -30))).status == 200)
            #expect(try await Self.me(catalog, token: rsa.token(Self.claims(notBefore: 30))).status == 200)
            // The client library asks its provider for a token before each request.
            let api = CatalogClient(baseURL: catalog.client.baseURL, credentials: .identityToken { rsa.token(Self.claims()) }, timeout: 10)
            #expect(try await api.me().value.id == user.id)
            await expectProblem(403, "forbidden") { try await api.games.create(GameInput(name: "G", imageName: "g")) }
        }
    }

    @Test(arguments: TestEngine.all) func everyForgeryIsRefused(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let rsa = try await TokenSigner.make(.rsa, kid: "rsa-1"), ec = try await TokenSigner.make(.ec, kid: "ec-1")
            let stranger = try await TokenSigner.make(.rsa, kid: "rsa-1")
            let (catalog, file) = try Self.catalog(trusting: [rsa, ec])
            defer { try? FileManager.default.removeItem(at: file) }
            let valid = rsa.token(Self.claims())
            let parts = valid.split(separator: ".").map(String.init)
            let payload = TokenSigner.base64URL(TokenSigner.json(Self.claims()))
            let tampered = TokenSigner.base64URL(TokenSigner.json(Self.claims(subject: "admin")))
            let hsInput = TokenSigner.base64URL(TokenSigner.json(["alg": "HS256", "kid": "rsa-1"])) + "." + payload
            let publicKey = Array(TokenSigner.json(rsa.jwk))
            let forgeries: [(String, String)] = [
                ("alg none", TokenSigner.base64URL(TokenSigner.json(["alg": "none", "kid": "rsa-1"])) + "." + payload + "."),
                ("alg none, signature kept", TokenSigner.base64URL(TokenSigner.json(["alg": "none", "kid": "rsa-1"])) + "." + payload + "." + parts[2]),
                // An hour out of the 60 s leeway: however long the machine takes to send them.
                ("expired", rsa.token(Self.claims(expires: -3600))),
                ("nbf in the future", rsa.token(Self.claims(notBefore: 3600))),
                ("wrong iss", rsa.token(Self.claims(issuer: "https://evil.example"))),
                ("wrong aud", rsa.token(Self.claims(audience: "someone-else"))),
                ("unknown kid", try await TokenSigner.make(.rsa, kid: "rsa-2").token(Self.claims())),
                ("tampered payload", parts[0] + "." + tampered + "." + parts[2]),
                ("another key's signature", stranger.token(Self.claims())),
                ("HS256 keyed with the RSA public key", hsInput + "." + TokenSigner.base64URL(TokenSigner.hmacSHA256(Array(hsInput.utf8), secret: publicKey))),
                ("RS256 header on the EC key", ec.token(Self.claims(), header: ["alg": "RS256", "kid": "ec-1"])),
                (
                    "ES256 signature truncated",
                    {
                        let t = ec.token(Self.claims()); return String(t.dropLast(4))
                    }()
                ),
                ("no exp", rsa.token(Self.claims().filter { $0.key != "exp" })),
                ("two segments", parts[0] + "." + parts[1]),
                ("not base64url", parts[0] + ".%%%." + parts[2]),
            ]
            for (name, token) in forgeries {
                let response = try await Self.me(catalog, token: token)
                #expect(response.status == 401, "\(name): \(response.status)")
                #expect(response.problem?.code == "invalidToken", "\(name)")
                #expect(response.header("WWW-Authenticate") == "Bearer realm=\"catalog\", error=\"invalid_token\"", "\(name)")
            }
            #expect(try await catalog.client.get("/v1/users").decode(Page<User>.self).items.count == 1, "no forgery made a user")
            #expect(try await Self.me(catalog, token: valid).status == 200)
        }
    }

    @Test(arguments: TestEngine.all) func keysAreReadAgainOnReload(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let old = try await TokenSigner.make(.ec, kid: "old"), new = try await TokenSigner.make(.ec, kid: "new")
            let (catalog, file) = try Self.catalog(trusting: [old])
            defer { try? FileManager.default.removeItem(at: file) }
            #expect(try await Self.me(catalog, token: new.token(Self.claims())).status == 401)
            let accepted = old.token(Self.claims(subject: "before"))
            #expect(try await Self.me(catalog, token: accepted).status == 200)
            try TokenSigner.keySet([new]).write(to: file)
            #expect(try catalog.application.reloadIdentityKeys() == 1)
            #expect(try await Self.me(catalog, token: new.token(Self.claims(subject: "fresh"))).status == 200)
            #expect(try await Self.me(catalog, token: old.token(Self.claims(subject: "stale"))).status == 401)
            #expect(try await Self.me(catalog, token: accepted).status == 401, "a token of a removed key is not remembered past the reload")
            // A broken file keeps the keys in use.
            try Data("{\"keys\": [{\"kty\": \"oct\"}]}".utf8).write(to: file)
            #expect(throws: (any Error).self) { try catalog.application.reloadIdentityKeys() }
            #expect(try await Self.me(catalog, token: new.token(Self.claims(subject: "still"))).status == 200)
        }
    }
}

/// API keys, roles and ownership over a real server.
@Suite struct AccessTests {
    static func api(_ catalog: TestCatalog, _ key: String) -> CatalogClient {
        CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(key), timeout: 10)
    }

    @Test(arguments: TestEngine.all) func aRevokedKeyIsRefusedOnTheNextRequestOnEveryLoop(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false) { $0.server.loopThreads = 2 }
            let member = try catalog.user("Member")
            let created = try await Self.api(catalog, member.key).apiKeys.create(APIKeyInput(name: "phone"))
            #expect(created.secret.hasPrefix("catalog_") && created.secret.count == 51)
            #expect(created.key.prefix == String(created.secret.prefix(16)))
            #expect(created.key.role == .member && created.key.userId == member.id)
            // Used over several connections, so both event loops have seen it.
            for _ in 0..<6 {
                let client = APIClient(baseURL: catalog.client.baseURL, key: created.secret)
                #expect(try await client.get("/v1/me", headers: ["Connection": "close"]).status == 200)
            }
            let listed = try await Self.api(catalog, member.key).apiKeys.list().items
            #expect(listed.map(\.id).contains(created.key.id))
            #expect(listed.first { $0.id == created.key.id }?.lastUsedAt != nil, "its first use is recorded")
            #expect(!String(decoding: try await catalog.client.get("/v1/api-keys").body, as: UTF8.self).contains(created.secret), "never listed")
            try await Self.api(catalog, member.key).apiKeys.revoke(created.key.id)
            for _ in 0..<6 {
                let client = APIClient(baseURL: catalog.client.baseURL, key: created.secret)
                let response = try await client.get("/v1/me", headers: ["Connection": "close"])
                #expect(response.status == 401)
                #expect(response.problem?.code == "invalidToken")
            }
            // The client library says which refusal it was.
            let revoked = await Self.refusal { _ = try await Self.api(catalog, created.secret).me() }
            #expect(revoked == .unauthorized(try #require(revoked?.problem)) && revoked?.problem?.code == "invalidToken")
            let lacking = await Self.refusal { _ = try await Self.api(catalog, member.key).games.create(GameInput(name: "G", imageName: "g")) }
            #expect(lacking == .forbidden(try #require(lacking?.problem)) && lacking?.problem?.code == "forbidden")
            let anonymous = await Self.refusal { _ = try await CatalogClient(baseURL: catalog.client.baseURL, timeout: 10).me() }
            #expect(anonymous == .unauthorized(try #require(anonymous?.problem)) && anonymous?.problem?.code == "unauthenticated")
        }
    }

    /// The client error `body` fails with; `nil` when it succeeds.
    static func refusal(_ body: () async throws -> Void) async -> CatalogClientError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? CatalogClientError
        }
    }

    @Test(arguments: TestEngine.all) func aKeyOnceCheckedIsNotReadAgainButRevocationStillApplies(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Member")
            // On PostgreSQL, which other servers may share, once the server's lease of remembered credentials is current.
            if let credentials = catalog.application.store.credentials {
                for _ in 0..<100 where !credentials.isCurrent { try await Task.sleep(for: .milliseconds(50)) }
                #expect(credentials.isCurrent)
            }
            #expect(try await catalog.client(key: member.key).get("/v1/me").status == 200)
            // Behind the server's back: the row goes, the remembered key still works (no read)...
            if case let .postgresql(url) = catalog.application.store.location {
                // (Without telling the servers, which a change of a key's hash otherwise does.)
                try PostgresAdmin.run(
                    """
                    ALTER TABLE api_keys DISABLE TRIGGER api_keys_changed_credentials;
                    UPDATE api_keys SET secret_hash = decode(md5(random()::text) || md5(random()::text), 'hex') WHERE user_id = '\(member.id.rawValue)';
                    ALTER TABLE api_keys ENABLE TRIGGER api_keys_changed_credentials
                    """, at: url)
            } else {
                var configuration = Configuration()
                configuration.busyMode = .timeout(10)  // the server's writer may be recording the key's first use
                let queue = try DatabaseQueue(path: catalog.directory.appendingPathComponent("catalog.sqlite").path, configuration: configuration)
                try await queue.write { db in try db.execute(sql: "UPDATE api_keys SET secret_hash = randomblob(32) WHERE user_id = ?", arguments: [member.id.rawValue]) }
                try queue.close()
            }
            #expect(try await catalog.client(key: member.key).get("/v1/me").status == 200, "checked from memory")
            // ...while any change through the API is seen at once.
            let keys = try await catalog.api.apiKeys.list().items.filter { $0.userId == member.id }
            try await catalog.api.apiKeys.revoke(keys[0].id)
            #expect(try await catalog.client(key: member.key).get("/v1/me").status == 401)
        }
    }

    @Test(arguments: TestEngine.all) func expiredKeysAndKeysAboveTheCallerAreRefused(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Member"), editor = try catalog.user("Editor", role: .editor)
            await expectProblem(403, "forbidden") { try await Self.api(catalog, member.key).apiKeys.create(APIKeyInput(name: "x", role: .editor)) }
            await expectProblem(403, "forbidden") { try await Self.api(catalog, editor.key).apiKeys.create(APIKeyInput(name: "x", role: .admin)) }
            await expectProblem(403, "forbidden") {
                try await Self.api(catalog, member.key).apiKeys.create(APIKeyInput(name: "x", userId: editor.id))
            }
            var problem = await expectProblem(422) { try await catalog.api.apiKeys.create(APIKeyInput(name: "x", role: .admin, userId: member.id)) }
            #expect(problem?.errors?.map(\.pointer) == ["/role"])
            problem = await expectProblem(422) { try await catalog.api.apiKeys.create(APIKeyInput(name: "x", userId: CatalogID())) }
            #expect(problem?.errors?.map(\.pointer) == ["/userId"])
            problem = await expectProblem(422) { try await catalog.api.apiKeys.create(APIKeyInput(name: "x", expiresAt: Date(timeIntervalSinceNow: -1))) }
            #expect(problem?.errors?.map(\.pointer) == ["/expiresAt"])
            // An admin makes a member's key; it acts as that member.
            let made = try await catalog.api.apiKeys.create(APIKeyInput(name: "for member", userId: member.id))
            #expect(try await Self.api(catalog, made.secret).me().value.id == member.id)
            // A key that expires stops working when it does.
            // (Fifteen seconds: long enough for the next two requests on a machine loaded by
            // the whole suite running at once; five were not, on CI.)
            let expiry = Date(timeIntervalSinceNow: 15)
            let brief = try await Self.api(catalog, member.key).apiKeys.create(APIKeyInput(name: "brief", expiresAt: expiry))
            #expect(try await catalog.client(key: brief.secret).get("/v1/me").status == 200)
            await expectProblem(403, "forbidden") { try await Self.api(catalog, brief.secret).apiKeys.create(APIKeyInput(name: "forever")) }
            // A member key of an editor neither sees nor revokes the editor's own key.
            let editorKeys = try await Self.api(catalog, editor.key).apiKeys.list().items
            let memberKey = try await Self.api(catalog, editor.key).apiKeys.create(APIKeyInput(name: "member key"))
            #expect(try await Self.api(catalog, memberKey.secret).apiKeys.list().items.map(\.id) == [memberKey.key.id])
            for key in editorKeys {
                #expect(try await catalog.client(key: memberKey.secret).get("/v1/api-keys/\(key.id)").status == 404)
                #expect(try await catalog.client(key: memberKey.secret).send("DELETE", "/v1/api-keys/\(key.id)").status == 404)
            }
            #expect(try await catalog.client(key: editor.key).get("/v1/me").status == 200)
            #expect(try await catalog.client(key: memberKey.secret).send("DELETE", "/v1/me").status == 403, "a weaker key cannot end the account")
            #expect(try await catalog.client(key: editor.key).get("/v1/me").status == 200)
            try await Task.sleep(for: .milliseconds(max(0, Int((expiry.timeIntervalSinceNow + 0.5) * 1000))))
            #expect(try await catalog.client(key: brief.secret).get("/v1/me").status == 401)
        }
    }

    @Test(arguments: TestEngine.all) func aRoleChangeAppliesToTheNextRequest(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let editor = try catalog.user("Editor", role: .editor)
            let game = ["name": "G", "imageName": "g"]
            #expect(try await catalog.client(key: editor.key).send("POST", "/v1/games", json: game).status == 201)
            let demoted = try await catalog.client.send("PATCH", "/v1/users/\(editor.id)", json: ["role": "member"], contentType: "application/merge-patch+json")
            #expect(demoted.status == 200)
            #expect(try await catalog.client(key: editor.key).send("POST", "/v1/games", json: game).status == 403, "the key's role never exceeds its user's")
            // Promoting the user back does not raise what a member key may do.
            let member = try await Self.api(catalog, editor.key).apiKeys.create(APIKeyInput(name: "member key"))
            _ = try await catalog.client.send("PATCH", "/v1/users/\(editor.id)", json: ["role": "admin"], contentType: "application/merge-patch+json")
            #expect(try await catalog.client(key: member.secret).send("POST", "/v1/games", json: game).status == 403)
            #expect(try await catalog.client(key: editor.key).send("POST", "/v1/games", json: game).status == 201, "its editor key is an editor's again")
            // Users cannot change their own role.
            let own = try await catalog.client(key: member.secret).send("PATCH", "/v1/me", json: ["role": "admin"], contentType: "application/merge-patch+json")
            #expect(own.status == 422)
            #expect(own.problem?.errors?.map(\.code) == ["readOnly"])
        }
    }

    @Test(arguments: TestEngine.all) func profilesShowEmailsOnlyToTheirUserAndAdmins(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Member"), other = try catalog.user("Other")
            let changed = try await Self.api(catalog, member.key).updateMe(MergePatch().set("email", "m@example.com").set("displayName", "Mia"))
            #expect(changed.value.email == "m@example.com" && changed.value.displayName == "Mia")
            let seenByOther = try await catalog.client(key: other.key).get("/v1/users/\(member.id)")
            #expect(try seenByOther.decode(User.self).email == nil && seenByOther.decode(User.self).displayName == "Mia")
            #expect(try await catalog.anonymous.get("/v1/users/\(member.id)").decode(User.self).email == nil)
            #expect(try await catalog.api.users.get(member.id).value.email == "m@example.com")
            #expect(try await catalog.client(key: member.key).get("/v1/users/\(member.id)").decode(User.self).email == "m@example.com")
            let bad = try await catalog.client(key: member.key).send(
                "PATCH", "/v1/me", json: ["avatarURL": "http://example.com/a.png", "email": "no"],
                contentType: "application/merge-patch+json")
            #expect(bad.problem?.errors?.map(\.pointer) == ["/avatarURL", "/email"])
        }
    }

    @Test(arguments: TestEngine.all) func deletingAnAccountRevokesItsKeysKeepsItsCommentsAndDropsItsPrivatePlaylists(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Leaving"), other = try catalog.user("Other")
            let api = Self.api(catalog, member.key)
            let second = try await api.apiKeys.create(APIKeyInput(name: "second"))
            let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "I", streamURL: URL(string: "https://example.com/i")!)).value.id
            let comment = try await api.comments.post(on: item, CommentInput(body: "Still here")).value
            #expect(comment.author == "Leaving" && comment.authorId == member.id && !comment.authorDeleted)
            let hidden = try await api.playlists.create(PlaylistInput(title: "Mine", visibility: .private)).value
            let shared = try await api.playlists.create(PlaylistInput(title: "Ours")).value
            #expect(shared.ownerId == member.id)

            try await api.deleteMe()
            await expectProblem(401, "invalidToken") { try await api.me() }
            await expectProblem(401, "invalidToken") { try await Self.api(catalog, second.secret).me() }
            let kept = try await catalog.anonymous.get("/v1/comments/\(comment.id)").decode(CatalogModels.Comment.self)
            #expect(kept.body == "Still here" && kept.authorDeleted && kept.authorId == nil && kept.author == CommentInput.deletedAuthorName)
            await expectProblem(404) { try await catalog.api.playlists.get(hidden.id) }
            let orphan = try await catalog.api.playlists.get(shared.id).value
            #expect(orphan.ownerId == nil)
            #expect(
                try await catalog.client(key: other.key).send(
                    "PATCH", "/v1/playlists/\(shared.id)", json: ["title": "Mine now"],
                    contentType: "application/merge-patch+json"
                ).status == 403, "an unowned playlist is editors' only")
            await expectProblem(404) { try await catalog.api.users.get(member.id) }
        }
    }

    @Test(arguments: TestEngine.all) func privatePlaylistsAreHiddenFromEveryoneButTheirOwnerAndEditors(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let owner = try catalog.user("Owner"), other = try catalog.user("Other"), editor = try catalog.user("Editor", role: .editor)
            let item = try await catalog.api.playableItems.create(PlayableItemInput(title: "I", streamURL: URL(string: "https://example.com/i")!)).value.id
            let playlist = try await Self.api(catalog, owner.key).playlists.create(PlaylistInput(title: "Secret", visibility: .private)).value
            _ = try await Self.api(catalog, owner.key).entries(of: playlist.id).replace(with: [item])
            let paths = ["/v1/playlists/\(playlist.id)", "/v1/playlists/\(playlist.id)/entries"]
            for path in paths {
                for (client, status) in [
                    (catalog.anonymous, 404), (catalog.client(key: other.key), 404), (catalog.client(key: owner.key), 200),
                    (catalog.client(key: editor.key), 200),
                ] {
                    let response = try await client.get(path)
                    #expect(response.status == status, "\(path): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
                }
            }
            let write = try await catalog.client(key: other.key).send("PATCH", paths[0], json: ["title": "x"], contentType: "application/merge-patch+json")
            #expect(write.status == 404, "a hidden playlist is not there for others to change either")
            let lists = ["/v1/playlists", "/v1/playlists?playableItemId=\(item)", "/v1/playable-items/\(item)?include=playlists", "/v1/playlists?q=secret"]
            for path in lists {
                #expect(!(try await catalog.client(key: other.key).get(path).text.contains(playlist.id.rawValue)), "\(path)")
                #expect(!(try await catalog.anonymous.get(path).text.contains(playlist.id.rawValue)), "\(path)")
                #expect(try await catalog.client(key: owner.key).get(path).text.contains(playlist.id.rawValue), "\(path)")
            }
        }
    }

    @Test(arguments: TestEngine.all) func malformedCredentialsAre401AndReadsMayRequireOne(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false) { $0.requireAuthForReads = true }
            for value in [
                "Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer ", "bearer\tcatalog_x", "Bearer a b", "Bearer ä", "Bearer catalog_" + String(repeating: "A", count: 43),
                "Bearer " + String(repeating: "x", count: 8193), "Bearer \(catalog.adminKey)x",
            ] {
                let response = try await catalog.anonymous.get("/v1/games", headers: ["Authorization": value])
                #expect(response.status == 401 || response.status == 431, "\(value.prefix(30)): \(response.status)")
                #expect(response.status == 431 || response.problem?.code == "invalidToken", "\(value.prefix(30))")
            }
            let anonymousRead = try await catalog.anonymous.get("/v1/games")
            #expect(anonymousRead.status == 401 && anonymousRead.problem?.code == "unauthenticated")
            #expect(try await catalog.anonymous.get("/healthz").status == 200, "health stays open")
            #expect(try await catalog.client.get("/v1/games").status == 200)
        }
    }

    @Test(arguments: TestEngine.all) func metricsMayHaveTheirOwnOpenListener(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false) { $0.metricsListener = ("127.0.0.1", 0) }
            let listener = try #require(catalog.application.metricsServer)
            let open = APIClient(baseURL: URL(string: "http://127.0.0.1:\(listener.port)")!)
            let metrics = try await open.get("/metrics")
            #expect(metrics.status == 200 && metrics.text.contains("catalog_"))
            #expect(try await open.get("/v1/games").status == 404, "only metrics there")
            #expect(try await catalog.anonymous.get("/metrics").status == 401, "the main port still needs an admin")
        }
    }
}
