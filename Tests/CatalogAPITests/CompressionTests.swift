import CatalogClient
import CatalogModels
import Foundation
import HTTPServer
import ServiceTestSupport
import TestSupport
import Testing

@testable import CatalogService
@testable import CatalogStore

/// Answers in gzip, as curl and gunzip see them on the wire: which answers are compressed
/// and for whom, their fields and tags, revalidation in either coding, writes (and so
/// secrets) never compressed, and a body answered again compressed once.
@Suite struct CompressionTests {
    /// What curl received for `path` with `headers`: the header block and the
    /// body's bytes as sent, not decoded.
    static func fetch(
        _ catalog: TestCatalog, _ path: String, _ headers: [String] = [], method: String = "GET", data: String? = nil
    ) async throws
        -> (head: String, body: [UInt8])
    {
        let file = catalog.directory.appendingPathComponent("body-\(UUID().uuidString)")
        var arguments = ["-s", "-D", "-", "-o", file.path, "-X", method]
        for header in headers { arguments += ["-H", header] }
        if let data { arguments += ["-H", "Content-Type: application/json", "--data-binary", data] }
        arguments.append(catalog.client.baseURL.absoluteString + path)
        let run = try await onThread { [arguments] in try runCommand("/usr/bin/env", ["curl"] + arguments) }
        #expect(run.status == 0)
        let body = (try? Data(contentsOf: file)).map { [UInt8]($0) } ?? []
        try? FileManager.default.removeItem(at: file)
        return (run.output, body)
    }

    /// The values of the field `name` (lowercase) in `head`, lowercased.
    static func field(_ head: String, _ name: String) -> [String] {
        head.split(separator: "\r\n").filter { $0.lowercased().hasPrefix(name + ":") }.map {
            $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces).lowercased()
        }
    }

    /// The `ETag` in `head`, as sent.
    static func tag(_ head: String) -> String? {
        head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("etag:") }.map { $0.dropFirst(5).trimmingCharacters(in: .whitespaces) }
    }

    /// `bytes` decoded by gunzip.
    static func gunzip(_ bytes: [UInt8], in directory: URL) async throws -> [UInt8] {
        let file = directory.appendingPathComponent("coded-\(UUID().uuidString).gz")
        try Data(bytes).write(to: file)
        let path = file.path
        let run = try await onThread { try runCommand("/usr/bin/env", ["gunzip", "-f", path]) }
        #expect(run.status == 0, "\(run.output)")
        let plain = URL(fileURLWithPath: String(path.dropLast(3)))
        defer { try? FileManager.default.removeItem(at: plain) }
        return [UInt8](try Data(contentsOf: plain))
    }

    @Test func readsAboveAKibibyteAreGzippedForClientsThatAcceptIt() async throws {
        let catalog = try TestCatalog(seed: false)
        defer { try? catalog.stop() }
        for index in 0..<12 {
            _ = try await catalog.api.playableItems.create(
                PlayableItemInput(title: "Clip \(index)", description: String(repeating: "words ", count: 20), streamURL: URL(string: "https://example.com/\(index).m3u8")!))
        }
        let page = "/v1/playable-items?limit=12"
        let plain = try await Self.fetch(catalog, page)
        #expect(plain.body.count > Compression.minimumBytes)
        #expect(Self.field(plain.head, "content-encoding").isEmpty && Self.field(plain.head, "vary") == ["accept-encoding"])
        let plainTag = try #require(Self.tag(plain.head))

        let coded = try await Self.fetch(catalog, page, ["Accept-Encoding: gzip"])
        #expect(Self.field(coded.head, "content-encoding") == ["gzip"] && Self.field(coded.head, "vary") == ["accept-encoding"])
        #expect(Self.field(coded.head, "content-length") == ["\(coded.body.count)"] && coded.body.count * 3 < plain.body.count)
        #expect(try await Self.gunzip(coded.body, in: catalog.directory) == plain.body, "the same bytes, in gzip")
        let codedTag = try #require(Self.tag(coded.head))
        #expect(codedTag == String(plainTag.dropLast()) + "-gzip\"")

        // How clients say it: weights, `*`, `x-gzip`; a refusal or a malformed weight gets identity.
        for (accepting, expected) in [
            ("gzip;q=0.5, br", true), ("*", true), ("x-gzip", true), ("br;q=1, *;q=0.1", true), ("GZIP ; Q=1", true),
            ("gzip;q=0", false), ("*;q=0", false), ("identity", false), ("br", false), ("gzip;q=2", false), ("gzip;q=0.0000", false), ("gzip;q=0, *", false),
        ] {
            let answer = try await Self.fetch(catalog, page, ["Accept-Encoding: \(accepting)"])
            #expect(Self.field(answer.head, "content-encoding") == (expected ? ["gzip"] : []), "\(accepting)")
        }
        // curl's own decoder agrees.
        let decodedByCurl = try await onThread { [url = catalog.client.baseURL.absoluteString + page] in
            try runCommand("/usr/bin/env", ["curl", "-s", "--compressed", url])
        }
        #expect(Array(decodedByCurl.output.utf8) == plain.body)

        // Either coding's tag revalidates either coding: a 304, which varies too.
        for (tag, accepting) in [(codedTag, "gzip"), (plainTag, "gzip"), (codedTag, "identity")] {
            let revalidated = try await Self.fetch(catalog, page, ["Accept-Encoding: \(accepting)", "If-None-Match: \(tag)"])
            #expect(revalidated.head.hasPrefix("HTTP/1.1 304") && revalidated.body.isEmpty, "\(tag) \(accepting)")
            #expect(Self.field(revalidated.head, "vary") == ["accept-encoding"])
        }

        // The page's gzip is kept: asked for again, it is not compressed again.
        #expect(Compression.copies.holds(plain.body, digest: Digest.of(plain.body)))
    }

    @Test func smallAnswersWritesAndSecretsAreNeverCompressed() async throws {
        let catalog = try TestCatalog(seed: false)
        defer { try? catalog.stop() }
        // A write's answer over a kibibyte: identity, whatever the client accepts.
        let long = String(repeating: "a long description ", count: 100)
        let created = try await Self.fetch(
            catalog, "/v1/playable-items", ["Accept-Encoding: gzip", "Authorization: Bearer \(catalog.adminKey)"], method: "POST",
            data: "{\"title\":\"Long\",\"description\":\"\(long)\",\"streamURL\":\"https://example.com/l.m3u8\"}")
        #expect(created.head.hasPrefix("HTTP/1.1 201") && created.body.count > Compression.minimumBytes)
        #expect(Self.field(created.head, "content-encoding").isEmpty && Self.field(created.head, "vary").allSatisfy { $0 != "accept-encoding" })
        let item = try CatalogJSON.makeDecoder().decode(PlayableItem.self, from: Data(created.body))
        // The same item read: compressed; a write naming its coded tag still names its version.
        let read = try await Self.fetch(catalog, "/v1/playable-items/\(item.id)", ["Accept-Encoding: gzip"])
        #expect(Self.field(read.head, "content-encoding") == ["gzip"])
        let tag = try #require(Self.tag(read.head))
        #expect(tag.hasSuffix("-gzip\""))
        let patched = try await Self.fetch(
            catalog, "/v1/playable-items/\(item.id)", ["Authorization: Bearer \(catalog.adminKey)", "If-Match: \(tag)", "Content-Type: application/merge-patch+json"],
            method: "PATCH", data: "{\"title\":\"Renamed\"}")
        #expect(patched.head.hasPrefix("HTTP/1.1 200"), "\(patched.head)")

        // A new API key's secret: the answer to a write, never compressed.
        let key = try await Self.fetch(
            catalog, "/v1/api-keys", ["Accept-Encoding: gzip", "Authorization: Bearer \(catalog.adminKey)"], method: "POST", data: "{\"name\":\"k\"}")
        #expect(key.head.hasPrefix("HTTP/1.1 201") && Self.field(key.head, "content-encoding").isEmpty)
        #expect(String(decoding: key.body, as: UTF8.self).contains("\"secret\""))

        // A small answer: neither compressed nor varying.
        let small = try await Self.fetch(catalog, "/v1/games?limit=1", ["Accept-Encoding: gzip"])
        #expect(small.body.count < Compression.minimumBytes)
        #expect(Self.field(small.head, "content-encoding").isEmpty && !small.head.lowercased().contains("accept-encoding"))
        // An error: identity.
        let missing = try await Self.fetch(catalog, "/v1/playable-items/\(CatalogID())", ["Accept-Encoding: gzip"])
        #expect(missing.head.hasPrefix("HTTP/1.1 404") && Self.field(missing.head, "content-encoding").isEmpty)
    }
}
