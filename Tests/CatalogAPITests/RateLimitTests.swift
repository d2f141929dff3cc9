import CatalogModels
import CatalogService
import CatalogStore
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// Rate budgets per credential and per client address, announced on every answer.
@Suite struct RateLimitTests {
    @Test(arguments: TestEngine.all) func budgetsAreKeptPerCallerAndClass(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: true) {
                // Windows long enough that no token comes back while the test runs on a slow machine.
                $0.rateLimits = [
                    .read: RatePolicy(quota: 3, window: 600), .write: RatePolicy(quota: 2, window: 600),
                    .expensive: RatePolicy(quota: 1, window: 600),
                ]
            }
            let anonymous = catalog.anonymous
            var first = try await anonymous.get("/v1/games")
            #expect(first.status == 200)
            #expect(first.header("RateLimit-Policy") == #""3-per-600s";q=3;w=600"#)
            #expect(first.header("RateLimit") == #""3-per-600s";r=2;t=200"#)
            first = try await anonymous.get("/v1/games")
            #expect(first.header("RateLimit")?.hasPrefix(#""3-per-600s";r=1;"#) == true)
            _ = try await anonymous.get("/v1/games")
            let refused = try await anonymous.get("/v1/games")
            #expect(refused.status == 429)
            #expect(try refused.decode(Problem.self).code == "rateLimited")
            #expect(refused.header("Content-Type") == "application/problem+json")
            #expect((1...200).contains(Int(refused.header("Retry-After") ?? "") ?? 0))
            #expect(refused.header("RateLimit")?.hasPrefix(#""3-per-600s";r=0;"#) == true)

            // A search spends from the expensive budget, not the spent read budget.
            #expect(try await anonymous.get("/v1/games?q=space").status == 200)
            #expect(try await anonymous.get("/v1/games?q=space").status == 429)
            // A failed credential spends from its address's budget: this one is spent.
            let bad = try await catalog.client(key: "catalog_" + String(repeating: "A", count: 43)).get("/v1/games")
            #expect(bad.status == 429)
            // The admin's key has budgets of its own; a write spends the write budget.
            #expect(try await catalog.client.get("/v1/games").status == 200)
            let created = try await catalog.client.send("POST", "/v1/games", json: ["name": "Budget", "imageName": "b"])
            #expect(created.status == 201)
            #expect(created.header("RateLimit")?.hasPrefix(#""2-per-600s";r=1;"#) == true)
            #expect(try await catalog.client.send("POST", "/v1/games", json: ["name": "Budget 2", "imageName": "b"]).status == 201)
            #expect(try await catalog.client.send("POST", "/v1/games", json: ["name": "Budget 3", "imageName": "b"]).status == 429)
            // Health and the contract are never limited.
            for _ in 0..<5 { #expect(try await anonymous.get("/healthz").status == 200) }
            // Refusals are counted by class.
            let metrics = String(decoding: try await catalog.client.get("/metrics").body, as: UTF8.self)
            #expect(metrics.contains(#"catalog_http_rejected_total{reason="rateLimited.read"} 2"#))
            #expect(metrics.contains(#"catalog_http_rejected_total{reason="rateLimited.write"} 1"#))
        }
    }

    @Test func policiesParse() {
        #expect(RatePolicy.parse("off") == .some(nil))
        #expect(RatePolicy.parse("read=10/1")??[.read] == RatePolicy(quota: 10, window: 1))
        #expect(RatePolicy.parse("read=10/1")??[.write] == RatePolicy.defaults[.write])
        #expect(RatePolicy.parse("reads=10/1") == nil)
        #expect(RatePolicy.parse("read=0/1") == nil)
        #expect(RatePolicy.parse("read=10") == nil)
    }
}

/// CORS for browser apps on allowed origins, on every answer including errors.
@Suite struct CORSTests {
    @Test(arguments: TestEngine.all) func allowedOriginsGetPreflightsAndExposedFields(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: true) { $0.corsAllowedOrigins = ["https://app.example.com"] }
            let preflight = try await catalog.anonymous.send(
                "OPTIONS", "/v1/games",
                headers: [
                    "Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
                ])
            #expect(preflight.status == 204)
            #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example.com")
            #expect(preflight.header("Access-Control-Allow-Methods")?.contains("POST") == true)
            #expect(
                preflight.header("Access-Control-Allow-Headers")
                    == "Authorization, Cache-Control, Content-Type, If-Match, If-None-Match, Idempotency-Key, Last-Event-ID, X-Request-Id")
            #expect(preflight.header("Access-Control-Max-Age") == "600")
            #expect(preflight.header("Vary") == "Origin")

            let read = try await catalog.anonymous.get("/v1/games", headers: ["Origin": "https://app.example.com"])
            #expect(read.header("Access-Control-Allow-Origin") == "https://app.example.com")
            #expect(read.header("Access-Control-Expose-Headers") == "ETag, Link, Location, RateLimit, RateLimit-Policy, Retry-After, X-Request-Id")
            // Errors carry them too.
            let missing = try await catalog.anonymous.get("/v1/games/\(CatalogID())", headers: ["Origin": "https://app.example.com"])
            #expect(missing.status == 404)
            #expect(missing.header("Access-Control-Allow-Origin") == "https://app.example.com")
            #expect(missing.header("Vary") == "Origin")
            let unauthenticated = try await catalog.anonymous.send(
                "POST", "/v1/games", json: ["name": "X", "imageName": "x"],
                headers: ["Origin": "https://app.example.com"])
            #expect(unauthenticated.status == 401)
            #expect(unauthenticated.header("Access-Control-Allow-Origin") == "https://app.example.com")

            // Another origin gets no grant, only Vary.
            let other = try await catalog.anonymous.send(
                "OPTIONS", "/v1/games",
                headers: [
                    "Origin": "https://evil.example", "Access-Control-Request-Method": "DELETE",
                ])
            #expect(other.header("Access-Control-Allow-Origin") == nil)
            #expect(other.header("Vary") == "Origin")
            #expect(try await catalog.anonymous.get("/v1/games", headers: ["Origin": "https://evil.example"]).header("Access-Control-Allow-Origin") == nil)
        }
    }

    @Test(arguments: TestEngine.all) func noOriginIsAllowedByDefault(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let read = try await catalog.anonymous.get("/v1/games", headers: ["Origin": "https://app.example.com"])
            #expect(read.header("Access-Control-Allow-Origin") == nil)
            #expect(read.header("Vary") == nil)
        }
    }
}
