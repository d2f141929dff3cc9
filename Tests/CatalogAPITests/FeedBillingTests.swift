import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import ServiceTestSupport
import Testing

@testable import CatalogService

/// The change feed bills a page by what it costs, and no caller holds more than its share
/// of the feed's pool.
@Suite struct FeedBillingTests {
    struct FeedPage: Decodable {
        let hasMore: Bool
        let nextToken: String
    }

    @Test(arguments: TestEngine.all) func aFullPageIsAnExpensiveRead(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: true) {
                $0.rateLimits = [
                    .read: RatePolicy(quota: 100, window: 600), .write: RatePolicy(quota: 10, window: 600),
                    .expensive: RatePolicy(quota: 2, window: 600),
                ]
            }
            let reader = try catalog.user("Reader"), other = try catalog.user("Other")
            let client = catalog.client(key: reader.key)
            // Two full pages of the demo catalog spend the expensive budget…
            let first = try await client.get("/v1/changes?limit=5")
            #expect(first.status == 200)
            let token = try first.decode(FeedPage.self).nextToken
            let second = try await client.get("/v1/changes?limit=5&since=\(token)")
            #expect(try second.decode(FeedPage.self).hasMore)
            // …so the next request waits for it, whatever page it would get.
            let refused = try await client.get("/v1/changes?limit=5&since=\(token)")
            #expect(refused.status == 429)
            #expect(refused.problem?.code == "rateLimited")
            #expect(refused.header("RateLimit-Policy")?.hasPrefix(#""2-per-600s";q=2;w=600"#) == true, "the expensive budget's")
            // Another caller's budget is its own; pages that are not full cost a read only.
            var since = ""
            while true {
                let page = try await catalog.client(key: other.key).get("/v1/changes?limit=1000" + since)
                #expect(page.status == 200)
                let decoded = try page.decode(FeedPage.self)
                since = "&since=" + decoded.nextToken
                if !decoded.hasMore { break }
            }
            for _ in 0..<5 {
                #expect(try await catalog.client(key: other.key).get("/v1/changes?limit=1000" + since).status == 200, "an empty page is cheap")
            }
        }
    }

    @Test func largePagesQueueApartAndEachCallerHoldsFourReadsOfAPool() throws {
        #expect(ChangeFeed.pool.perCaller == 4 && ChangeFeed.largePages.perCaller == 4)
        func pool(_ query: String?, accept: String = "application/json") throws -> WorkPool {
            let headers = HTTPHeaders([("Accept", accept)])
            return ChangeFeed.pool(for: try ChangeFeed.parse(HTTPRequest(method: .GET, path: "/v1/changes", query: query, headers: headers)))
        }
        #expect(try pool(nil) === ChangeFeed.pool, "the default page is a small read")
        #expect(try pool("limit=100") === ChangeFeed.pool)
        #expect(try pool("limit=101") === ChangeFeed.largePages)
        #expect(try pool("limit=1000&wait=5") === ChangeFeed.largePages)
        #expect(try pool("limit=1000", accept: "text/event-stream") === ChangeFeed.pool, "a stream's opening reads no page")
    }
}
