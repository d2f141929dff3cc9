import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// Error paths are paths: a hostile body gets an answer as small as a success, and what a
/// caller is shown depends on who asks.
@Suite(.serialized) struct BoundedAnswerTests {
    /// A JSON object of `count` unknown members, `m00000`…, in a shuffled order.
    static func unknownMembers(_ count: Int) -> Data {
        var names = (0..<count).map { String(format: "m%05d", $0) }
        var generator = SystemRandomNumberGenerator()
        names.shuffle(using: &generator)
        return Data(("{" + names.map { "\"\($0)\":0" }.joined(separator: ",") + "}").utf8)
    }

    @Test(arguments: TestEngine.all) func aDocumentOfThousandsOfUnknownMembersListsFiftyAndCountsTheRest(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let member = try catalog.user("Mallory")
            let item = try #require(try await catalog.anonymous.get("/v1/playable-items?limit=1").decode(Page<PlayableItem>.self).items.first)
            let body = Self.unknownMembers(1000)
            for (method, path, contentType, more) in [
                ("POST", "/v1/playable-items/\(item.id)/comments", "application/json", 1001 - 50),
                ("PATCH", "/v1/me", "application/merge-patch+json", 1000 - 50),
            ] {
                let response = try await catalog.client(key: member.key).send(method, path, headers: ["Content-Type": contentType], body: body)
                #expect(response.status == 422, "\(method) \(path): \(response.text.prefix(200))")
                let problem = try #require(response.problem)
                let errors = try #require(problem.errors)
                #expect(errors.count == Problem.maxListedErrors)
                #expect(problem.moreErrors == more)
                // The first by name, whatever the order they were sent in.
                let unknown = errors.filter { $0.code == "unknownField" }.map { $0.pointer }
                #expect(unknown == (0..<unknown.count).map { String(format: "/m%05d", $0 as Int) })
                #expect(response.body.count < 8 * 1024, "the answer stays small: \(response.body.count) bytes")
            }
            // Past 1,024 members the reader stops where it is: a 400, as small.
            let huge = try await catalog.client(key: member.key).send(
                "PATCH", "/v1/me", headers: ["Content-Type": "application/merge-patch+json"],
                body: Self.unknownMembers(20_000))
            #expect(huge.status == 400 && huge.problem?.code == "malformedJSON")
            #expect(huge.body.count < 1024)
        }
    }

    @Test(arguments: TestEngine.all) func anOrderOfUnknownItemsListsFiftyAndCountsTheRest(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let playlist = try await catalog.client.send("POST", "/v1/playlists", json: ["title": "Unknowns"]).decode(Playlist.self)
            let response = try await catalog.client.send(
                "PUT", "/v1/playlists/\(playlist.id)/entries",
                json: ["playableItemIds": (0..<120).map { _ in CatalogID().rawValue }])
            #expect(response.status == 422)
            #expect(response.problem?.errors?.count == Problem.maxListedErrors)
            #expect(response.problem?.moreErrors == 70)
        }
    }

    @Test(arguments: TestEngine.all) func aMemberOfAHugeNameIsShownCut(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let name = String(repeating: "n", count: 20_000)
            let response = try await catalog.client.send("POST", "/v1/games", json: [name: 1, "name": "G", "imageName": "g"])
            #expect(response.status == 422)
            let error = try #require(response.problem?.errors?.first)
            #expect(error.pointer == "/" + String(repeating: "n", count: 64) + "…")
            #expect(response.body.count < 2 * 1024)
        }
    }

    @Test(arguments: TestEngine.all) func aBodyIsReadOnlyForACallerWhoMaySendIt(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Mallory")
            let editor = try catalog.user("Ed", role: .editor)
            // Their keys are read once, then known from the head alone.
            #expect(try await catalog.client(key: member.key).get("/v1/me").status == 200)
            #expect(try await catalog.client(key: editor.key).get("/v1/me").status == 200)
            let unknown = "catalog_" + String(repeating: "A", count: 43)
            #expect(try await catalog.client(key: unknown).get("/v1/me").status == 401, "a key-shaped token that names no key, once read")
            let port = try #require(catalog.client.baseURL.port)
            func head(_ authorization: String?, length: Int) -> [UInt8] {
                Array(
                    ("POST /v1/games HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + (authorization.map { "Authorization: Bearer \($0)\r\n" } ?? "") + "Content-Length: \(length)\r\n\r\n").utf8)
            }
            // The body never comes: each answer is made from the head, and the connection closes.
            for (authorization, status, code) in [
                (nil, 401, "unauthenticated"), (unknown, 401, "invalidToken"),
                // On PostgreSQL every key is read again from the database: with its body.
                (member.key, TestEngine.isSQLite ? 403 : 413, TestEngine.isSQLite ? "forbidden" : "contentTooLarge"),
                (editor.key, 413, "contentTooLarge"),
            ] as [(String?, Int, String)] {
                let answer = try await Loopback.exchange(port: port, head(authorization, length: 1_048_575))
                #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(answer)")
                #expect(answer.contains("\"code\":\"\(code)\""))
                #expect(answer.contains("Connection: close"))
            }
            // A document fits the route's limit; the largest legal one with room to spare.
            let description = String(repeating: "\u{1F600}", count: 5000)
            let created = try await catalog.client(key: editor.key).send("POST", "/v1/games", json: ["name": "G", "imageName": "g", "description": description])
            #expect(created.status == 201, "\(created.text.prefix(300))")
        }
    }

    @Test(arguments: TestEngine.all) func aSchemaValidEmailIsAccepted(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Mita")
            for email in ["মিতা@\u{09BF}উদাহরণ.বাংলা", "δοκιμή@παράδειγμα.δοκιμή", "用户@例子.广告"] {
                let response = try await catalog.client(key: member.key).send("PATCH", "/v1/me", json: ["email": email], contentType: "application/merge-patch+json")
                #expect(response.status == 200, "\(email): \(response.text)")
                #expect(try response.decode(User.self).email == email.precomposedStringWithCanonicalMapping)
            }
        }
    }

    @Test(arguments: TestEngine.all) func onlyTheUserAndAdminsSeeItsRole(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let member = try catalog.user("Mo")
            let editor = try catalog.user("Ed", role: .editor)
            for (client, sees) in [
                (catalog.anonymous, false), (catalog.client(key: editor.key), false), (catalog.client(key: member.key), false),
                (catalog.client, true),
            ] {
                let admin = try await client.get("/v1/users/\(catalog.adminID)")
                #expect(admin.status == 200)
                #expect(try admin.decode(User.self).role == (sees ? .admin : nil), "\(admin.text)")
                let list = try await client.get("/v1/users?fields=displayName,role")
                if list.status == 200 {
                    let items = try #require((try JSONSerialization.jsonObject(with: list.body) as? [String: Any])?["items"] as? [[String: Any]])
                    #expect(!items.isEmpty && items.allSatisfy { ($0["role"] != nil) == sees })
                }
            }
            #expect(try await catalog.client(key: editor.key).get("/v1/me").decode(User.self).role == .editor, "a user sees its own role")
            #expect(try await catalog.client(key: editor.key).get("/v1/users/\(editor.id)").decode(User.self).role == .editor)
        }
    }
}
