import CatalogModels
import Foundation
import Testing

@testable import CatalogSchema

/// The declarations are the one place a resource's fields are written: the rules they
/// apply are the ones clients check with `validationErrors()`, and no other file of the
/// server names a field.
@Suite struct DeclarationTests {
    /// The document `input` encodes to, as a body.
    func object(_ input: some Encodable) throws -> [String: JSONValue] {
        guard case let .object(object) = try JSONValue.parse(CatalogJSON.makeEncoder().encode(input)) else {
            Issue.record("not an object")
            return [:]
        }
        return object
    }

    func expectSameErrors(_ input: some Encodable & Validatable, _ shape: DocumentShape, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let server = shape.read(try object(input)).errors.listed.map { "\($0.pointer) \($0.code)" }
        let client = input.validationErrors().map { "\($0.pointer) \($0.code)" }
        #expect(Set(server) == Set(client), sourceLocation: sourceLocation)
        #expect(server.count == client.count, sourceLocation: sourceLocation)
    }

    static let long = String(repeating: "x", count: 5001)
    static let url = URL(string: "https://example.com/a.m3u8")!

    @Test func clientsCheckTheRulesTheServerApplies() throws {
        for title in ["", "ok", "tab\there", Self.long] {
            for duration in [nil, -1, 42, 2_000_000.0] as [Double?] {
                let item = PlayableItemInput(
                    title: title, description: title, streamURL: URL(string: "ftp://example.com/x")!,
                    thumbnailURL: duration == nil ? nil : Self.url, durationSeconds: duration)
                try expectSameErrors(item, ResourceSchema.playableItem.creation)
                try expectSameErrors(PlayableItemInput(title: title, streamURL: Self.url), ResourceSchema.playableItem.edit)
            }
            try expectSameErrors(GameInput(name: title, description: title, imageName: title), ResourceSchema.game.creation)
            try expectSameErrors(PlaylistInput(title: title, description: title), ResourceSchema.playlist.creation)
            try expectSameErrors(CommentInput(body: title), ResourceSchema.comment.creation)
            try expectSameErrors(CommentEdit(body: title), ResourceSchema.comment.edit)
        }
        for (code, latitude) in [("FR", 46.2), ("fr", 91), ("FRA", -90.5), ("", 0)] {
            try expectSameErrors(LocationInput(name: code, countryCode: code, latitude: latitude, longitude: latitude * 2), ResourceSchema.location.creation)
        }
        for position in [nil, -1, 0, 10_000, 10_001] as [Int?] {
            try expectSameErrors(PlaylistEntryInput(playableItemId: CatalogID(), position: position), PlaylistEntrySchema.insertion)
        }
    }

    @Test func bodiesRefuseUnknownAndServerSetMembersAndReadEveryKind() throws {
        let (values, errors) = ResourceSchema.comment.creation.read([
            "author": .string("ann"), "body": .string("hi"), "parentId": .null, "replyCount": .number(3), "rating": .number(5), "id": .string("x"),
        ])
        #expect(errors.listed.map(\.pointer) == ["/author", "/id", "/rating", "/replyCount"], "the author is the caller, never the body")
        #expect(errors.listed.map(\.code) == ["readOnly", "readOnly", "unknownField", "readOnly"])
        #expect(values["body"] == .text("hi"))
        #expect(values["parentId"] == .null)
        let imported = ResourceSchema.comment.importRecord.read([
            "id": .string(CatalogID().rawValue), "playableItemId": .string("42"), "author": .string("a"), "deleted": .bool(true),
            "replyCount": .number(1.5), "createdAt": .string("2025-01-31T12:00:00.000Z"), "updatedAt": .string("yesterday"), "version": .number(0),
        ])
        #expect(imported.errors.listed.map(\.pointer) == ["/playableItemId", "/replyCount", "/updatedAt", "/version"])
        #expect(imported.errors.listed.map(\.code) == ["invalidFormat", "invalidType", "invalidFormat", "outOfRange"])
        #expect(imported.values["createdAt"] == .integer(1_738_324_800_000))
        #expect(imported.values["deleted"] == .integer(1))
    }

    @Test func listFeaturesComeFromTheDeclarations() {
        #expect(ResourceSchema.playableItem.sortableFields == ["createdAt", "title"])
        #expect(ResourceSchema.playableItem.searchColumns.map(\.column) == ["title", "description"])
        #expect(ResourceSchema.playableItem.searchColumns.map(\.weight) == [10, 1])
        #expect(ResourceSchema.comment.sortableFields == ["createdAt"])
        #expect(ResourceSchema.location.searchTable == nil && ResourceSchema.location.geographic)
        #expect(ResourceSchema.all.map(\.type) == CatalogRecord.types)
    }

    /// Field names the server side may write only in their declaration (and the demo
    /// catalog): every camel-case member of every declared document.
    static var fieldNames: Set<String> {
        let documents =
            (ResourceSchema.all + [.user, .apiKey]).flatMap(\.members) + PlaylistEntrySchema.document
            + [PlaylistEntrySchema.insertion, PlaylistEntrySchema.move, PlaylistEntrySchema.order, PlaylistEntrySchema.record].flatMap(\.fields)
        let types = Set(ResourceSchema.all.map(\.type))
        return Set(documents.map(\.name).filter { name in name.contains(where: \.isUppercase) && !types.contains(name) })
            .subtracting(SchemaField.stampNames).union(["author"])
    }

    @Test func noFileOfTheStoreOrServiceNamesAField() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        // The declarations and the demo data.
        let allowed = ["Sources/CatalogSchema/Resources/", "Sources/CatalogStore/Seed/DemoCatalog.swift"]
        var offenders: [String] = []
        for module in ["CatalogSchema", "CatalogStore", "CatalogService"] {
            let folder = root.appendingPathComponent("Sources/\(module)")
            let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
            #expect(!files.isEmpty)
            for file in files {
                let path = "Sources/\(module)/\(file)"
                guard !allowed.contains(where: path.hasPrefix) else { continue }
                // Route patterns name their path parameters as openapi.yaml does: not fields.
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                    .replacingOccurrences(of: #"\{[A-Za-z]+\}"#, with: "", options: .regularExpression)
                for name in Self.fieldNames where text.range(of: "\\b\(name)\\b", options: .regularExpression) != nil {
                    offenders.append("\(path): \(name)")
                }
            }
        }
        #expect(offenders.isEmpty, "\(offenders)")
    }

    @Test func everyScopeAListTakesIsDeclaredOnTheResourceItLists() {
        let id = CatalogID()
        let resources = ResourceSchema.all + [.user, .apiKey]
        for schema in resources {
            for (name, scope) in schema.filters {
                #expect(schema.scopes.contains(scope(id).kind), "\(schema.type): ?\(name)= lists within a scope it does not declare")
            }
        }
        #expect(ResourceSchema.comment.scopes == [.commentsOn, .repliesTo])
        #expect(ResourceSchema.apiKey.scopes == [.keysOf])
        // Each kind lists one resource.
        let kinds = resources.flatMap(\.scopes)
        #expect(Set(kinds.map(\.name)).count == kinds.count)
        // A role bound adds the roles up to it, by the model's names only.
        #expect(ListScope.keysOf(user: id, upTo: .editor).filter == "t.user_id = ? AND t.role IN ('member', 'editor')")
        #expect(ListScope.commentsOn(item: id).parent?.table == "playable_items")
        #expect(ListScope(.keysOf, id).filter == "t.user_id = ? AND FALSE", "a role bound left out keeps nothing")
        let impostor = ScopeKind(name: "keysOf", filter: "t.user_id = ?")
        #expect(!ResourceSchema.apiKey.scopes.contains(impostor), "a kind is its declared instance, not its name")
    }
}
