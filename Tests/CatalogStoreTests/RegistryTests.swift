import CatalogSchema
import Testing

@testable import CatalogStore

/// The store's registries cover every declaration: nothing declared is dropped silently.
@Suite struct RegistryTests {
    @Test func theChangeLogRendersEveryDeclaredResourceAndEntries() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        // A type without a renderer would vanish from the feed: its changes could not be shown.
        #expect(Set(store.changes.renderers.keys) == Set(ResourceSchema.all.map(\.type) + [ChangeFeedSchema.entryType]))
    }

    @Test func everyDeclaredIncludeIsImplementedAndNothingElse() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        for schema in ResourceSchema.all + [.user, .apiKey] {
            #expect(Set(store.embeddings[schema.type]?.keys ?? [:].keys) == Set(schema.includes), "\(schema.type)")
        }
        #expect(Set(store.embeddings.keys).isSubset(of: Set(ResourceSchema.all.map(\.type))))
    }
}
