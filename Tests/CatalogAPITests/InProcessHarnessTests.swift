import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// The in-process harness (``APIClient/init(inProcess:key:)``) answers as the server does
/// over a socket: the same status, body and the fields the application sets, for reads,
/// writes, refusals and routing errors. Tests of the application's rules may then use it.
@Suite struct InProcessHarnessTests {
    @Test(arguments: TestEngine.all) func inProcessAnswersAreTheWiresAnswers(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let member = try catalog.user("Member")
            let game = try await catalog.client.send("POST", "/v1/games", json: ["name": "Harness", "imageName": "h"]).decode(Game.self)
            let tag = try #require(try await catalog.client.get("/v1/games/\(game.id)").header("ETag"))
            let oversized = String(repeating: "x", count: 2 * 1024 * 1024)
            // (method, path, headers, body, key): what each client sends alike.
            let requests: [(String, String, [String: String], Any?, String?)] = [
                ("GET", "/v1/games?limit=2&sort=name", [:], nil, catalog.adminKey),
                ("GET", "/v1/games/\(game.id)", [:], nil, nil),
                ("GET", "/v1/games/\(game.id)", ["If-None-Match": tag], nil, nil),
                ("HEAD", "/v1/games/\(game.id)", [:], nil, nil),
                ("GET", "/v1/games/\(CatalogID())", [:], nil, nil),
                ("GET", "/v1/games?sort=nope", [:], nil, nil),
                ("GET", "/v1/nothing-here", [:], nil, nil),
                ("DELETE", "/v1/games", [:], nil, catalog.adminKey),
                ("OPTIONS", "/v1/games", [:], nil, nil),
                ("POST", "/v1/games", [:], ["name": "No key", "imageName": "k"], nil),
                ("POST", "/v1/games", [:], ["name": "Member", "imageName": "m"], member.key),
                ("POST", "/v1/games", [:], ["name": "", "imageName": "bad name"], catalog.adminKey),
                ("POST", "/v1/games", [:], ["name": oversized, "imageName": "big"], catalog.adminKey),
                ("PATCH", "/v1/games/\(game.id)", ["If-Match": "\"99\"", "Content-Type": "application/merge-patch+json"], ["name": "Stale"], catalog.adminKey),
                ("GET", "/v1/me", [:], nil, member.key),
                ("GET", "/v1/me", [:], nil, "catalog_notakey"),
            ]
            for (method, path, fields, body, key) in requests {
                // URLSession asks for gzip unless told otherwise; in process, nothing is.
                let headers = fields.merging(["Accept-Encoding": "identity"]) { given, _ in given }
                let wire = APIClient(baseURL: catalog.client.baseURL, key: key)
                let inProcess = APIClient(inProcess: catalog.application.server, key: key)
                let (overWire, answered) =
                    if let body {
                        (try await wire.send(method, path, json: body, headers: headers), try await inProcess.send(method, path, json: body, headers: headers))
                    } else {
                        (try await wire.send(method, path, headers: headers), try await inProcess.send(method, path, headers: headers))
                    }
                let label = "\(method) \(path.prefix(60)) key: \(key == nil ? "none" : "some")"
                #expect(answered.status == overWire.status, "\(label)")
                // Rate-limit fields count down between the two; the rest is the application's.
                for field in ["Content-Type", "ETag", "Cache-Control", "Vary", "Allow", "Location"] {
                    if field == "Location", overWire.status == 201 { continue }  // a new id each time
                    #expect(answered.header(field) == overWire.header(field), "\(label): \(field)")
                }
                if overWire.status != 201 { #expect(Self.comparable(answered) == Self.comparable(overWire), "\(label): body") }
            }
        }
    }

    /// The body without what differs between two answers by design (the request's id in a problem).
    static func comparable(_ response: APIResponse) -> String {
        guard var problem = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else { return response.text }
        problem["requestId"] = nil
        problem["instance"] = nil
        return String(decoding: (try? JSONSerialization.data(withJSONObject: problem, options: [.sortedKeys])) ?? Data(), as: UTF8.self)
    }
}
