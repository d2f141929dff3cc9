import CatalogModels
import Foundation
import Testing

@testable import CatalogMedia

/// What the pipeline tells from bytes, and the rendition cache's budgets.
@Suite struct ImagePipelineTests {
    @Test func formatsAreToldFromTheirFirstBytes() {
        #expect(ImageFormat.sniff([0xFF, 0xD8, 0xFF, 0xE0]) == .jpeg)
        #expect(ImageFormat.sniff([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) == .png)
        #expect(ImageFormat.sniff(Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8)) == .webp)
        func heif(_ major: String, _ compatible: [String]) -> [UInt8] {
            let brands = [major, "\u{0}\u{0}\u{0}\u{0}"] + compatible
            let body = Array("ftyp".utf8) + brands.flatMap { Array($0.utf8) }
            return [0, 0, 0, UInt8(body.count + 4)] + body
        }
        #expect(ImageFormat.sniff(heif("avif", ["mif1", "miaf"])) == .avif)
        #expect(ImageFormat.sniff(heif("mif1", ["avif"])) == .avif)
        #expect(ImageFormat.sniff(heif("heic", ["mif1"])) == .heic)
        #expect(ImageFormat.sniff(heif("mp42", ["isom"])) == nil)  // a video, not an image
        #expect(ImageFormat.sniff(Array("GIF89a".utf8)) == nil)
        #expect(ImageFormat.sniff(Array("<svg xmlns=".utf8)) == nil)
        #expect(ImageFormat.sniff([]) == nil)
        #expect(ImageFormat(contentType: "image/JPG") == .jpeg && ImageFormat(contentType: "image/png; charset=x") == .png)
        #expect(ImageFormat(contentType: "image/svg+xml") == nil && ImageFormat(contentType: "text/html") == nil)
    }

    @Test func theLadderRoundsUpAndStopsAtItsLargest() {
        #expect(ImageRules.ladderWidth(atLeast: 1) == 64 && ImageRules.ladderWidth(atLeast: 129) == 192)
        #expect(ImageRules.ladderWidth(atLeast: 9999) == 2048)
        let reference = ImageReference(url: "/v1/images/" + String(repeating: "a", count: 64), width: 10, height: 10, blurHash: "L00000", contentType: "image/png")
        #expect(reference.path(points: 44, scale: 3, format: .webp) == reference.url + "?w=192&format=webp")
        #expect(reference.path(width: 300, height: 200, fit: .cover, quality: 75) == reference.url + "?w=320&h=256&fit=cover&format=jpeg&q=80")
    }

    @Test func aRecencyListKeepsKeysInOrderOfUse() {
        var list = RecencyList()
        for key in ["a", "b", "c", "d"] { list.touch(key) }
        list.touch("b")
        list.remove("c")
        list.remove("zz")
        var order: [String] = []
        while let oldest = list.oldest {
            order.append(oldest)
            list.remove(oldest)
        }
        #expect(order == ["a", "d", "b"] && list.count == 0)
        list.touch("x")
        list.touch("x")
        #expect(list.oldest == "x" && list.count == 1)
    }

    @Test func theCacheKeepsItsBudgetsLeastRecentlyUsedOutFirst() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("renditions-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let hash = { (n: Int) in String(repeating: String(n % 10), count: 64) }
        let cache = try RenditionCache(directory: directory.path, diskBudget: 10_000, memoryBudget: 4_000)
        for n in 0..<5 { cache.put(hash(n) + "/w64", [UInt8](repeating: UInt8(n), count: 2_000)) }
        #expect(cache.get(hash(0) + "/w64") != nil)  // used: now the most recent
        for n in 5..<8 { cache.put(hash(n) + "/w64", [UInt8](repeating: UInt8(n), count: 2_000)) }
        let usage = cache.usage
        #expect(usage.disk <= 10_000 && usage.memory <= 4_000, "\(usage)")
        #expect(cache.get(hash(0) + "/w64")?.allSatisfy { $0 == 0 } == true)
        #expect(cache.get(hash(1) + "/w64") == nil)
        // A restart finds what the last run kept.
        let again = try RenditionCache(directory: directory.path, diskBudget: 10_000, memoryBudget: 4_000)
        #expect(again.usage.entries == usage.entries && again.get(hash(7) + "/w64")?.count == 2_000)
        again.remove(hash: hash(7))
        #expect(again.get(hash(7) + "/w64") == nil)
    }
}
