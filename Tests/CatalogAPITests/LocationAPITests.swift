import CatalogModels
import CatalogStore
import Foundation
import ServiceTestSupport
import Testing

/// `/v1/locations`, including `near`/`radius` and `bbox`.
@Suite struct LocationAPITests {
    /// Great-circle distance in meters (haversine, mean Earth radius).
    static func distance(_ latitude1: Double, _ longitude1: Double, _ latitude2: Double, _ longitude2: Double) -> Double {
        let radians = Double.pi / 180
        let a =
            pow(sin((latitude2 - latitude1) * radians / 2), 2)
            + cos(latitude1 * radians) * cos(latitude2 * radians) * pow(sin((longitude2 - longitude1) * radians / 2), 2)
        return 6_371_008.8 * 2 * asin(min(1, sqrt(a)))
    }

    @Test(arguments: TestEngine.all) func seededCountriesHaveAccurateCoordinates(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let all = try await catalog.client.all("/v1/locations?limit=100&sort=name", as: Location.self)
            #expect(all.count == DemoCatalogCounts.locations)
            let france = try #require(all.first { $0.countryCode == "FR" })
            #expect(abs(france.latitude - 46.227638) < 1e-9)
            #expect(all.allSatisfy { $0.distanceMeters == nil })
            #expect(all.map(\.name) == all.map(\.name).sorted())
        }
    }

    @Test(arguments: TestEngine.all) func nearIsOrderedByDistanceWithinTheRadius(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let paris = (48.8566, 2.3522)
            let response = try await catalog.client.get("/v1/locations?near=\(paris.0),\(paris.1)&radius=1000000")
            #expect(response.status == 200)
            let page = try response.decode(Page<Location>.self)
            #expect(page.items.first?.countryCode == "FR")
            let all = try await catalog.client.all("/v1/locations?limit=100", as: Location.self)
            let expected = all.map { ($0.countryCode, Self.distance(paris.0, paris.1, $0.latitude, $0.longitude)) }
                .filter { $0.1 <= 1_000_000 }.sorted { $0.1 < $1.1 }
            #expect(page.items.map(\.countryCode) == expected.map(\.0))
            for (item, (_, meters)) in zip(page.items, expected) {
                #expect(abs((item.distanceMeters ?? -1) - meters) < 1, "\(item.name)")
            }
            // Paging by distance continues in order.
            let paged = try await catalog.client.all("/v1/locations?near=\(paris.0),\(paris.1)&radius=1000000&limit=2", as: Location.self)
            #expect(paged.map(\.id) == page.items.map(\.id))
        }
    }

    @Test(arguments: TestEngine.all) func nearCrossesTheAntimeridianAndCoversTheGlobe(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            // Fiji, 178°E: New Zealand (174.9°E) is ~2,000 km away across no meridian trouble;
            // from 179°W the search box wraps around 180°.
            let wrapped = try await catalog.client.get("/v1/locations?near=-30,-179&radius=2500000").decode(Page<Location>.self)
            #expect(wrapped.items.map(\.countryCode) == ["NZ"])
            let everything = try await catalog.client.all("/v1/locations?near=0,0&radius=20037509&limit=100", as: Location.self)
            let withoutRadius = try await catalog.client.all("/v1/locations?near=0,0&limit=100", as: Location.self)
            #expect(withoutRadius.map(\.id) == everything.map(\.id), "without a radius: every location, nearest first")
            // Page by page, the growing rings (10 km, 80 km, …) give the same order.
            let onePerPage = try await catalog.client.all("/v1/locations?near=0,0&limit=1", as: Location.self)
            #expect(onePerPage.map(\.id) == everything.map(\.id))
            let fromParis = try await catalog.client.all("/v1/locations?near=48.8566,2.3522&limit=2", as: Location.self)
            #expect(fromParis.map(\.distanceMeters) == fromParis.map(\.distanceMeters).sorted { ($0 ?? 0) < ($1 ?? 0) })
            #expect(Set(fromParis.map(\.id)) == Set(everything.map(\.id)))
            #expect(everything.count == DemoCatalogCounts.locations)
            #expect(everything.map { $0.distanceMeters ?? 0 } == everything.map { $0.distanceMeters ?? 0 }.sorted())
        }
    }

    @Test(arguments: TestEngine.all) func boundingBoxFiltersIncludingAcrossTheAntimeridian(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let europe = try await catalog.client.all("/v1/locations?bbox=-10,35,20,60&sort=name", as: Location.self)
            #expect(Set(europe.map(\.countryCode)) == ["CH", "DE", "ES", "FR", "IE", "IT", "NL", "PT", "GB"])
            #expect(europe.allSatisfy { (-10...20).contains($0.longitude) && (35...60).contains($0.latitude) })
            #expect(europe.contains { $0.countryCode == "FR" } && !europe.contains { $0.countryCode == "US" })
            let pacific = try await catalog.client.all("/v1/locations?bbox=170,-50,-170,-30", as: Location.self)
            #expect(pacific.map(\.countryCode) == ["NZ"])
            // With near as well, both must hold, nearest first.
            let nearParisInBox = try await catalog.client.all("/v1/locations?near=48.8566,2.3522&radius=1000000&bbox=0,45,20,60", as: Location.self)
            let emptyBox = try await catalog.client.get("/v1/locations?bbox=0,60,20,45")
            #expect(emptyBox.status == 200)
            #expect(try emptyBox.decode(Page<Location>.self).items.isEmpty, "minLat above maxLat is an empty box")
            #expect(nearParisInBox.map(\.countryCode) == ["FR", "NL", "CH", "DE"])
        }
    }

    @Test(arguments: [
        ("near=48,2&radius=0", "radius"), ("near=48,2&radius=30000000", "radius"),
        ("radius=5", "radius"), ("near=91,0&radius=5", "near"), ("near=0,181&radius=5", "near"), ("near=abc&radius=5", "near"),
        ("near=1,2&radius=5&sort=name", "sort"), ("bbox=1,2,3", "bbox"), ("bbox=1e1,2,3,4", "bbox"), ("near=+1,2", "near"), ("bbox=0,-91,10,5", "bbox"),
        ("q=france", "q"),
    ])
    func invalidGeographicParametersAre400(_ query: String, _ parameter: String) async throws {
        let catalog = try TestCatalog(seed: false)
        let response = try await catalog.client.get("/v1/locations?\(query)")
        #expect(response.status == 400, "\(query)")
        #expect(response.problem?.detail?.contains("'\(parameter)'") == true, "\(query): \(response.problem?.detail ?? "")")
    }

    @Test(arguments: TestEngine.all) func invalidLocationListsEveryField(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let response = try await catalog.client.send("POST", "/v1/locations", json: ["name": "Atlantis", "countryCode": "atl", "latitude": 91, "longitude": "west"])
            #expect(response.status == 422)
            let codes = Dictionary(uniqueKeysWithValues: (response.problem?.errors ?? []).map { ($0.pointer, $0.code) })
            #expect(codes == ["/countryCode": "invalidFormat", "/latitude": "outOfRange", "/longitude": "invalidType"])
        }
    }

    @Test(arguments: TestEngine.all) func locationWritesKeepTheSpatialIndexInSync(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let created = try await catalog.client.send("POST", "/v1/locations", json: ["name": "Reykjavík", "countryCode": "IS", "latitude": 64.1466, "longitude": -21.9426])
            #expect(created.status == 201)
            let location = try created.decode(Location.self)
            #expect(try await catalog.client.get("/v1/locations?near=64,-22&radius=50000").decode(Page<Location>.self).items.count == 1)
            let moved = try await catalog.client.send(
                "PATCH", "/v1/locations/\(location.id)", json: ["latitude": -33.9, "longitude": 18.4],
                contentType: "application/merge-patch+json")
            #expect(moved.status == 200)
            #expect(try await catalog.client.get("/v1/locations?near=64,-22&radius=50000").decode(Page<Location>.self).items.isEmpty)
            #expect(try await catalog.client.get("/v1/locations?bbox=18,-34,19,-33").decode(Page<Location>.self).items.map(\.id) == [location.id])
        }
    }
}

/// `/v1/games`.
@Suite struct GameAPITests {
    @Test(arguments: TestEngine.all) func demoGamesAreSeededWithDescriptions(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let games = try await catalog.client.get("/v1/games").decode(Page<Game>.self).items
            #expect(games.map(\.name) == ["Space Invaders", "Discs of Tron", "Frogger", "Joust"])
            #expect(games.allSatisfy { $0.description.count > 100 && !$0.imageName.isEmpty })
        }
    }

    @Test(arguments: TestEngine.all) func searchAndSortByName(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            let frog = try await catalog.client.get("/v1/games?q=frog").decode(Page<Game>.self)
            #expect(frog.items.map(\.name) == ["Frogger"])
            let byDescription = try await catalog.client.get("/v1/games?q=ostriches").decode(Page<Game>.self)
            #expect(byDescription.items.map(\.name) == ["Joust"])
            let sorted = try await catalog.client.get("/v1/games?sort=-name").decode(Page<Game>.self)
            #expect(sorted.items.map(\.name) == ["Space Invaders", "Joust", "Frogger", "Discs of Tron"])
        }
    }

    @Test(arguments: TestEngine.all) func gameLifecycle(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let created = try await catalog.client.send("POST", "/v1/games", json: ["name": "Pac-Man", "imageName": "pac-man"])
            #expect(created.status == 201)
            let game = try created.decode(Game.self)
            #expect(game.description == "")
            let renamed = try await catalog.client.send("PATCH", "/v1/games/\(game.id)", json: ["name": "Ms. Pac-Man"], contentType: "application/merge-patch+json")
            #expect(try renamed.decode(Game.self).name == "Ms. Pac-Man")
            #expect(try await catalog.client.get("/v1/games?q=pac").decode(Page<Game>.self).items.map(\.name) == ["Ms. Pac-Man"])
            let badImage = try await catalog.client.send("PUT", "/v1/games/\(game.id)", json: ["name": "x", "imageName": "../etc/passwd"])
            #expect(badImage.problem?.errors?.map(\.pointer) == ["/imageName"])
            #expect(try await catalog.client.send("DELETE", "/v1/games/\(game.id)").status == 204)
        }
    }
}
