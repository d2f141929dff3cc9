import CatalogModels
import Foundation
import TestSupport
import Testing

@testable import CatalogSchema

/// `openapi.yaml` cannot drift from the declarations: every resource's component schemas
/// (`X`, `XInput`, `XPatch`) have the members the declaration gives them, the same
/// required and nullable flags, and string and number limits the declared rules keep.
@Suite struct ContractDeclarationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `openapi.yaml`'s component schemas, read by PyYAML (CI installs it with the spec
    /// validator): no YAML reader of our own to trust.
    static let contractJSON: Result<Data, any Error> = Result {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c", "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1]))['components']['schemas'], sys.stdout)",
            root.appendingPathComponent("openapi.yaml").path,
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileReadCorruptFile) }
        return data
    }

    /// The component schemas, by name.
    static func schemas() throws -> [String: [String: Any]] {
        let schemas = try JSONSerialization.jsonObject(with: try contractJSON.get()) as? [String: [String: Any]]
        return try #require(schemas)
    }

    /// Each declared resource with the name of its schemas in the contract.
    static let resources: [(schema: ResourceSchema, name: String)] = [
        (.game, "Game"), (.location, "Location"), (.playableItem, "PlayableItem"), (.playlist, "Playlist"), (.comment, "Comment"),
        (.user, "User"), (.apiKey, "APIKey"),
    ]

    struct Member: Equatable, CustomStringConvertible {
        let name: String
        let required: Bool
        let nullable: Bool
        var description: String { name + (required ? " (required)" : "") + (nullable ? " (nullable)" : "") }
    }

    /// The members of the contract's schema `name`, with their flags.
    static func contract(_ name: String) throws -> [Member] {
        let schema = try #require(try schemas()[name], "openapi.yaml has no schema \(name)")
        let properties = try #require(schema["properties"] as? [String: Any], "\(name) has no properties")
        let required = Set(schema["required"] as? [String] ?? [])
        return properties.map { name, value in
            // `type: [string, 'null']`, or `anyOf: [{$ref: …}, {type: 'null'}]`.
            let property = value as? [String: Any] ?? [:]
            let types = property["type"].map { $0 as? [String] ?? [$0 as? String ?? ""] } ?? []
            let alternatives = property["anyOf"] as? [[String: Any]] ?? []
            let nullable = types.contains("null") || alternatives.contains { $0["type"] as? String == "null" }
            return Member(name: name, required: required.contains(name), nullable: nullable)
        }.sorted { $0.name < $1.name }
    }

    /// The members a body of `shape` accepts: required ones are required, the others may
    /// be `null` (an absent or null optional member takes its default).
    static func declared(_ shape: DocumentShape, accepting: (SchemaField) -> Bool) -> [Member] {
        shape.fields.filter(accepting).map { Member(name: $0.name, required: $0.required, nullable: !$0.required) }.sorted { $0.name < $1.name }
    }

    /// What only the contract has, and what only the declaration has.
    static func difference(_ contract: [Member], _ declared: [Member]) -> String {
        "only in openapi.yaml: \(contract.filter { !declared.contains($0) }); only declared: \(declared.filter { !contract.contains($0) })"
    }

    @Test(arguments: resources.map(\.name))
    func aCreationBodyIsWhatTheDeclarationAccepts(_ name: String) throws {
        let schema = try #require(Self.resources.first { $0.name == name }?.schema)
        let contract = try Self.contract(name + "Input"), declared = Self.declared(schema.creation) { $0.access != .serverSet }
        #expect(contract == declared, "\(Self.difference(contract, declared))")
    }

    @Test(arguments: resources.map(\.name).filter { $0 != "APIKey" })
    func aPatchIsWhatTheDeclarationLetsChange(_ name: String) throws {
        let schema = try #require(Self.resources.first { $0.name == name }?.schema)
        // Every member of a patch is optional; `null` clears an optional one.
        let expected = Self.declared(schema.edit) { $0.access == .writable }.map { Member(name: $0.name, required: false, nullable: $0.nullable) }
        let contract = try Self.contract(name + "Patch")
        #expect(contract == expected, "\(Self.difference(contract, expected))")
    }

    @Test(arguments: resources.map(\.name).filter { $0 != "User" && $0 != "APIKey" })
    func anImportRecordIsWhatTheDeclarationImports(_ name: String) throws {
        let schema = try #require(Self.resources.first { $0.name == name }?.schema)
        // Records are read like bodies (the contract refers to the input's members): the
        // names and what is required; an optional member may be absent.
        let contract = try Self.contract(name + "Record").map { Member(name: $0.name, required: $0.required, nullable: false) }
        let declared = schema.importRecord.fields.filter { $0.importRole != .none }
            .map { Member(name: $0.name, required: $0.required && !$0.nullable, nullable: false) }.sorted { $0.name < $1.name }
        #expect(contract == declared, "\(Self.difference(contract, declared))")
    }

    @Test(arguments: resources.map(\.name))
    func aDocumentHasEveryDeclaredMemberAndItsIncludes(_ name: String) throws {
        let schema = try #require(Self.resources.first { $0.name == name }?.schema)
        let rendered = schema.members.filter { field in
            switch field.kind {
            case .ids, .documents: false  // bodies and import records only
            default: true
            }
        }
        let expected = Set(rendered.map(\.name)).union(schema.includes).union(schema.geographic ? ["distanceMeters"] : [])
        let members = try Self.contract(name)
        #expect(Set(members.map(\.name)) == expected)
        if name != "APIKey" {  // API keys take no `fields=`: their documents require what is always there
            #expect(members.filter(\.required).map(\.name) == ["id"], "with `fields=`, only `id` is always there")
        }
        #expect(members.filter(\.nullable).isEmpty, "an absent member is left out, never null")
    }

    @Test(arguments: resources.map(\.name))
    func stringAndNumberLimitsAreTheRulesLimits(_ name: String) throws {
        let schema = try #require(Self.resources.first { $0.name == name }?.schema)
        let properties = try #require(try Self.schemas()[name + "Input"]?["properties"] as? [String: [String: Any]])
        var checked = 0
        for field in schema.creation.fields where field.access != .serverSet {
            let property = try #require(properties[field.name], "\(name)Input.\(field.name)")
            switch field.kind {
            case let .text(rule):
                guard properties[field.name]?["enum"] == nil, let maxLength = property["maxLength"] as? Int else { continue }
                let minLength = property["minLength"] as? Int ?? 0
                // Letters keep every pattern of a plain text member; formats (emails) are tested on their own.
                guard let pattern = property["pattern"] as? String, Self.matches(pattern, "a"), property["format"] == nil else { continue }
                #expect(rule.violation(String(repeating: "a", count: maxLength)) == nil, "\(name).\(field.name) at maxLength \(maxLength)")
                #expect(rule.violation(String(repeating: "a", count: maxLength + 1)) != nil, "\(name).\(field.name) past maxLength \(maxLength)")
                #expect(
                    (rule.violation(String(repeating: "a", count: max(minLength, 1) - 1)) == nil) == (minLength == 0),
                    "\(name).\(field.name) under minLength \(minLength)")
                // A control character breaks the rule exactly when it breaks the pattern.
                let control = "a\u{1}a"
                #expect((rule.violation(control) == nil) == Self.matches(pattern, control), "\(name).\(field.name) and U+0001")
                checked += 1
            case let .number(rule):
                try Self.expectBounds(property, "\(name).\(field.name)") { rule.violation($0) != nil }
                checked += 1
            case let .integer(rule):
                try Self.expectBounds(property, "\(name).\(field.name)") { rule.violation(Int($0)) != nil }
                checked += 1
            default:
                continue
            }
        }
        #expect(checked > 0 || name == "APIKey" || name == "Comment" || name == "Playlist", "\(name): nothing was compared")
    }

    /// Expects the rule (`breaks`) to keep the contract's `minimum` and `maximum` exactly.
    static func expectBounds(_ property: [String: Any], _ label: String, _ breaks: (Double) -> Bool) throws {
        let minimum = try #require((property["minimum"] as? NSNumber)?.doubleValue, "\(label) minimum")
        let maximum = try #require((property["maximum"] as? NSNumber)?.doubleValue, "\(label) maximum")
        #expect(!breaks(minimum) && !breaks(maximum), "\(label) at its bounds")
        #expect(breaks(minimum - 1) && breaks(maximum + 1), "\(label) past its bounds")
    }

    /// Whether `text` matches the contract's `pattern` (ECMA-262, as JSON Schema says; the
    /// contract's patterns use only what ICU reads the same way).
    static func matches(_ pattern: String, _ text: String) -> Bool {
        guard let expression = try? NSRegularExpression(pattern: pattern) else { return false }
        return expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }
}
