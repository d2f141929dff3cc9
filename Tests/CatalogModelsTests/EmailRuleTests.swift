import CatalogModels
import Foundation
import Testing

/// The contract's email pattern and ``Rules/email(_:)`` accept exactly the same strings.
struct EmailRuleTests {
    /// The pattern `openapi.yaml` must carry, written from ``Rules/emailRefusedScalars``.
    static let pattern: String = {
        func escaped(_ value: UInt32) -> String {
            value <= 0xFF ? String(format: "\\x%02X", value) : String(format: "\\u%04X", value)
        }
        let ranges = Rules.emailRefusedScalars.map { $0.lowerBound == $0.upperBound ? escaped($0.lowerBound) : escaped($0.lowerBound) + "-" + escaped($0.upperBound) }
        let part = "[^" + ranges.joined() + "]+"
        return "^" + part + "@" + part + "$"
    }()

    @Test func theContractsPatternIsWrittenFromTheRule() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let contract = try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let lines = contract.split(separator: "\n").filter { $0.contains("email: {type:") }
        #expect(lines.count >= 4)
        for line in lines {
            #expect(line.contains("pattern: '\(Self.pattern)'"), "\(line)")
            #expect(line.contains("maxLength: \(Rules.maxEmailLength),"))
        }
    }

    @Test func theRuleAndThePatternAgree() throws {
        let regex = try NSRegularExpression(pattern: Self.pattern)
        // JSON Schema's `$` (ECMA-262) ends only at the end; ICU's also before a final line
        // terminator (U+2028), so the match must span the whole text.
        func matches(_ text: String) -> Bool {
            let whole = NSRange(text.startIndex..., in: text)
            return regex.firstMatch(in: text, range: whole)?.range == whole
        }
        var samples = [
            "ana@example.com", "উদাহরণ@\u{09BF}উদাহরণ.বাংলা", "δοκιμή@παράδειγμα.δοκιμή", "用户@例子.广告", "a b@c", "a@b@c", "@b", "a@", "",
            "a\u{00A0}b@c", "a\u{180E}b@c", "a\u{200C}@b", "a\u{1F600}@b", "é@x", "a@\u{0301}b", "a\u{2028}@b", "a\u{FEFF}@b",
        ]
        // Strings of scalars drawn near every boundary of the refused ranges, from a fixed seed.
        var boundary: [UInt32] = [0x41, 0x7E, 0x09BF, 0x0915, 0x1F600, 0x0301]
        for range in Rules.emailRefusedScalars {
            boundary += [range.lowerBound, range.upperBound, range.lowerBound &- 1, range.upperBound + 1]
        }
        let scalars = boundary.compactMap(Unicode.Scalar.init)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        for _ in 0..<2000 {
            var text = String.UnicodeScalarView()
            for _ in 0..<(1 + next(6)) { text.append(scalars[next(scalars.count)]) }
            text.append("@")
            for _ in 0..<(1 + next(6)) { text.append(scalars[next(scalars.count)]) }
            samples.append(String(text))
        }
        let disagreements = samples.filter { (Rules.email($0) == nil) != matches($0) }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(5).map { $0.unicodeScalars.map { String($0.value, radix: 16) } })")
        #expect(Rules.email("উদাহরণ@\u{09BF}উদাহরণ.বাংলা") == nil, "a domain that begins with a vowel sign")
    }
}
