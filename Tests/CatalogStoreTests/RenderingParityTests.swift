import CatalogModels
import Foundation
import Testing
@testable import CatalogStore

/// Rows rendered straight to JSON must be byte for byte what the Codable models encode to.
@Suite struct RenderingParityTests {
    static let awkward = ["plain", "quote \" backslash \\ slash /", "controls \u{1}\u{8}\u{c}\n\r\t\u{1f}\u{7f}", "é 😀 \u{2028} 中文", ""]

    func expectParity<Model: Codable & Equatable>(_ json: [UInt8], as type: Model.Type, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let model = try CatalogJSON.makeDecoder().decode(Model.self, from: Data(json))
        let encoded = Array(try CatalogJSON.makeEncoder().encode(model))
        #expect(encoded == json, "\(String(decoding: json, as: UTF8.self))", sourceLocation: sourceLocation)
    }

    @Test func everyResourceRendersAsItsModelEncodes() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        for (index, text) in Self.awkward.enumerated() {
            let item = try wait {
                store.items.create(PlayableItemInput(
                    title: "t" + text, description: text, streamURL: URL(string: "https://example.com/\(index)/a.m3u8?x=1&y=%20")!,
                    thumbnailURL: index % 2 == 0 ? URL(string: "https://example.com/p.jpg") : nil,
                    durationSeconds: [nil, 0, 596, 146.5, 1e-7][index]), completion: $0)
            }
            try expectParity(item.json, as: PlayableItem.self)
            try expectParity(try #require(try store.items.rendered(item.id)).json, as: PlayableItem.self)
            let game = try wait { store.games.create(GameInput(name: "g" + text, description: text, imageName: "g-\(index)"), completion: $0) }
            try expectParity(game.json, as: Game.self)
            let location = try wait {
                store.locations.create(LocationInput(name: "l" + text, countryCode: "FR", latitude: [0, -90, 90, 46.227638, -0.023559][index],
                                                     longitude: [0, -180, 180, 2.213749, 1e-7][index]), completion: $0)
            }
            try expectParity(location.json, as: Location.self)
        }
        for order in [ListRequest.Order.field("createdAt", descending: false), .field("title", descending: true)] {
            let page = try store.items.renderedList(ListRequest(limit: 3, order: order))
            try expectParity(page.json, as: Page<PlayableItem>.self)
        }
        let near = try store.locations.renderedList(ListRequest(order: .distance, areas: [.near(latitude: 10, longitude: 10, radiusMeters: 20_000_000)]))
        try expectParity(near.json, as: Page<Location>.self)
        let decoded = try CatalogJSON.makeDecoder().decode(Page<Location>.self, from: Data(near.json))
        #expect(decoded.items.allSatisfy { $0.distanceMeters != nil })
    }
}
