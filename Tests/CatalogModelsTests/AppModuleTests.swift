import Foundation
import Testing

/// What iOS apps import (`CatalogModels` and `CatalogClient`) builds on Apple platforms:
/// Foundation only, nothing Linux-only or server-side, and the platforms declared. No Xcode
/// runs here, so this reads the sources as text.
@Suite struct AppModuleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every Swift source of `module`, by path, with its text.
    static func sources(_ module: String) throws -> [(path: String, text: String)] {
        let folder = root.appendingPathComponent("Sources/\(module)")
        let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        return try files.sorted().map { ("Sources/\(module)/\($0)", try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8)) }
    }

    /// The modules a source imports, each with the `#if canImport(…)` it sits in, if any.
    static func imports(_ text: String) -> [(module: String, guardedBy: String?)] {
        var found: [(String, String?)] = []
        var conditions: [String] = []
        for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("#if ") { conditions.append(String(line.dropFirst(4))) }
            if line == "#endif" { _ = conditions.popLast() }
            let words = line.split(separator: " ").filter { !$0.hasPrefix("@") && !["public", "internal", "package", "private", "fileprivate"].contains($0) }
            guard words.first == "import", words.count >= 2 else { continue }
            // `import struct Foundation.URL` names its module after the kind.
            let name = words.count >= 3 ? words[2] : words[1]
            found.append((String(name.split(separator: ".")[0]), conditions.last))
        }
        return found
    }

    @Test(arguments: [("CatalogModels", ["Foundation"]), ("CatalogClient", ["Foundation", "CatalogModels"])])
    func importsFoundationAndTheModelsOnly(_ module: String, _ allowed: [String]) throws {
        let sources = try Self.sources(module)
        #expect(!sources.isEmpty)
        for (path, text) in sources {
            for found in Self.imports(text) {
                if found.module == "FoundationNetworking" {
                    // URLSession lives there on Linux only; Apple platforms have it in Foundation.
                    #expect(module == "CatalogClient" && found.guardedBy == "canImport(FoundationNetworking)", "\(path)")
                } else {
                    #expect(allowed.contains(found.module), "\(path) imports \(found.module)")
                }
            }
            for word in ["Glibc", "Musl", "epoll", "pthread_", "SIGPIPE", "Synchronization", "Mutex<", "Atomic<", "_Concurrency.Mutex"] {
                #expect(!text.contains(word), "\(path) uses \(word), which an app on iOS does not have")
            }
        }
    }

    @Test func theApplePlatformsAreDeclared() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        for platform in [".iOS(.v16)", ".macOS(.v13)", ".tvOS(.v16)", ".watchOS(.v9)", ".visionOS(.v1)"] {
            #expect(manifest.contains(platform), "Package.swift declares \(platform)")
        }
    }

    @Test func theImportReaderSeesEveryForm() {
        let found = Self.imports(
            """
            import Foundation
            @preconcurrency import Glibc
            public import struct CatalogModels.Game
            #if canImport(FoundationNetworking)
            import FoundationNetworking
            #endif
            """)
        #expect(found.map(\.module) == ["Foundation", "Glibc", "CatalogModels", "FoundationNetworking"])
        #expect(found.map(\.guardedBy) == [nil, nil, nil, "canImport(FoundationNetworking)"])
    }
}
