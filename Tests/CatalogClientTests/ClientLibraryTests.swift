import CatalogClient
import CatalogModels
import CatalogService
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// The client library against a real server: typed results, ETags, distinct 412s,
/// problem documents and lists that follow cursors.
@Suite struct ClientLibraryTests {
    func client(_ catalog: TestCatalog) -> CatalogClient {
        CatalogClient(baseURL: catalog.client.baseURL, credentials: .apiKey(catalog.adminKey), headers: ["X-Client": "tests"], timeout: 10)
    }

    @Test(arguments: TestEngine.all) func rateLimitedWritesAreRetriedAfterRetryAfter(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            // One write per three seconds: the second create waits out its 429 and goes through.
            let catalog = try TestCatalog(seed: false) { $0.rateLimits = [.write: RatePolicy(quota: 1, window: 3)] }
            let games = client(catalog).games
            _ = try await games.create(GameInput(name: "First", imageName: "a"))
            _ = try await games.create(GameInput(name: "Second", imageName: "b"))
            #expect(try await games.list().items.count == 2, "each create applied once")
            // Without retries the 429 reaches the caller, with the seconds to wait (a budget that
            // cannot refill while a slow machine runs the test).
            let slow = try TestCatalog(seed: false) { $0.rateLimits = [.write: RatePolicy(quota: 1, window: 600)] }
            let impatient = CatalogClient(baseURL: slow.client.baseURL, credentials: .apiKey(slow.adminKey), retries: 0)
            _ = try await impatient.games.create(GameInput(name: "Third", imageName: "c"))
            do {
                _ = try await impatient.games.create(GameInput(name: "Fourth", imageName: "d"))
                Issue.record("the budget was spent")
            } catch {
                guard let failure = error as? CatalogClientError, case let .rateLimited(problem, retryAfter) = failure else { throw error }
                #expect(problem.code == "rateLimited")
                #expect((1...600).contains(retryAfter ?? 0))
            }
        }
    }

    @Test(arguments: TestEngine.all) func createGetPatchReplaceDeleteWithETags(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let games = client(catalog).games
            let created = try await games.create(GameInput(name: "Tempest", imageName: "tempest"))
            #expect(created.etag == "\"1\"")
            #expect(created.value.name == "Tempest")
            let fetched = try await games.get(created.value.id)
            #expect(fetched == created)
            let patched = try await games.patch(created.value.id, MergePatch().set("description", "Vector shooter"), ifMatch: fetched.etag)
            #expect(patched.value.description == "Vector shooter")
            #expect(patched.etag == "\"2\"")
            do {
                _ = try await games.replace(created.value.id, with: GameInput(name: "Stale", imageName: "s"), ifMatch: fetched.etag)
                Issue.record("a stale ETag must fail")
            } catch {
                guard let failure = error as? CatalogClientError, case let .preconditionFailed(problem) = failure else { throw error }
                #expect(problem.status == 412)
            }
            let replaced = try await games.replace(created.value.id, with: GameInput(name: "Tempest 2000", imageName: "t2k"), ifMatch: patched.etag)
            #expect(replaced.value.description == "")
            try await games.delete(created.value.id, ifMatch: replaced.etag)
            do {
                _ = try await games.get(created.value.id)
                Issue.record("a deleted game must be gone")
            } catch {
                #expect((error as? CatalogClientError)?.problem?.status == 404)
                #expect((error as? CatalogClientError)?.problem?.code == "notFound")
            }
        }
    }

    @Test(arguments: TestEngine.all) func validationProblemsAreTyped(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            do {
                _ = try await client(catalog).locations.create(LocationInput(name: "", countryCode: "fr", latitude: 91, longitude: 0))
                Issue.record("invalid input must fail")
            } catch {
                guard let failure = error as? CatalogClientError, case let .problem(problem) = failure else { throw error }
                #expect(problem.status == 422)
                #expect(Set(problem.errors?.map(\.pointer) ?? []) == ["/name", "/countryCode", "/latitude"])
            }
        }
    }

    @Test(arguments: TestEngine.all) func allFollowsCursorsAcrossPages(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            var names: [String] = []
            for try await location in client(catalog).locations.all(ListQuery(limit: 5, sort: "name")) {
                names.append(location.name)
            }
            #expect(names.count == DemoCatalogCounts.locations)
            #expect(names == names.sorted())
            var near = ListQuery(limit: 2)
            near.near = (latitude: 48.8566, longitude: 2.3522, radius: 600_000)
            let page = try await client(catalog).locations.list(near)
            #expect(page.items.first?.countryCode == "FR")
            #expect(page.items.first?.distanceMeters != nil)
            let search = try await client(catalog).playableItems.list(ListQuery(search: "steel"))
            #expect(search.items.map(\.title) == ["Tears of Steel"])
            #expect(await client(catalog).isHealthy())
        }
    }

    @Test func transportErrorsAreDistinct() async throws {
        let unreachable = CatalogClient(baseURL: URL(string: "http://127.0.0.1:1")!, timeout: 2)
        do {
            _ = try await unreachable.games.list()
            Issue.record("nothing listens on port 1")
        } catch {
            guard case .transport = error else { throw error }
        }
    }

    @Test(arguments: TestEngine.all) func operationalEndpoints(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let api = client(catalog)
            #expect(await api.isHealthy())
            #expect(await api.isReady())
            #expect(try await api.openAPIDocument().hasPrefix("openapi: 3.1"))
            let metrics = try await api.metrics()
            #expect(metrics.contains("catalog_build_info"))
            guard TestEngine.isSQLite else {
                await #expect(throws: CatalogClientError.self, "501: PostgreSQL's own tools make backups") { try await api.createBackup() }
                return
            }
            let backup = try await api.createBackup()
            #expect(backup.integrityCheck == "ok")
            #expect(backup.bytes > 0)
            #expect(FileManager.default.fileExists(atPath: catalog.directory.appendingPathComponent("backups/\(backup.name)").path))
        }
    }
}
