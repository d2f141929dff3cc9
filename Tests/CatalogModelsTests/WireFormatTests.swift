import CatalogModels
import Foundation
import Testing

/// Golden JSON: the exact bytes client apps receive and send.
@Suite struct WireFormatTests {
    static let id = CatalogID("4B7F8C2E-0F7A-4C64-9A55-0E6BB1C4A6D2")!
    static let created = Timestamp.date(milliseconds: 1_795_305_898_751)
    static let updated = Timestamp.date(milliseconds: 1_795_305_999_007)

    func encode<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try CatalogJSON.makeEncoder().encode(value), as: UTF8.self)
    }

    @Test func playableItemGolden() throws {
        let item = PlayableItem(
            id: Self.id, title: "Big Buck Bunny", description: "A rabbit.",
            streamURL: URL(string: "https://example.com/bbb/master.m3u8")!, thumbnailURL: nil,
            durationSeconds: 596.5, likeCount: 2, viewCount: 17, createdAt: Self.created, updatedAt: Self.updated, version: 3)
        let json =
            #"{"createdAt":"2026-11-22T00:04:58.751Z","description":"A rabbit.","durationSeconds":596.5,"id":"4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2","likeCount":2,"streamURL":"https://example.com/bbb/master.m3u8","title":"Big Buck Bunny","updatedAt":"2026-11-22T00:06:39.007Z","version":3,"viewCount":17}"#
        #expect(try encode(item) == json)
        #expect(try CatalogJSON.makeDecoder().decode(PlayableItem.self, from: Data(json.utf8)) == item)
        // Documents from before counts were kept (an export, a device's saved catalog) decode with none.
        let older = json.replacingOccurrences(of: #","likeCount":2"#, with: "").replacingOccurrences(of: #","viewCount":17"#, with: "")
        var uncounted = item
        (uncounted.likeCount, uncounted.viewCount) = (0, 0)
        #expect(try CatalogJSON.makeDecoder().decode(PlayableItem.self, from: Data(older.utf8)) == uncounted)
    }

    @Test func gameGolden() throws {
        let game = Game(id: Self.id, name: "Joust", description: "", imageName: "joust", createdAt: Self.created, updatedAt: Self.created, version: 1)
        #expect(
            try encode(game)
                == #"{"createdAt":"2026-11-22T00:04:58.751Z","description":"","id":"4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2","imageName":"joust","name":"Joust","updatedAt":"2026-11-22T00:04:58.751Z","version":1}"#
        )
    }

    @Test func locationGoldenWithAndWithoutDistance() throws {
        var location = Location(
            id: Self.id, name: "France", countryCode: "FR", latitude: 46.227638, longitude: 2.213749,
            createdAt: Self.created, updatedAt: Self.created, version: 1)
        #expect(
            try encode(location)
                == #"{"countryCode":"FR","createdAt":"2026-11-22T00:04:58.751Z","id":"4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2","latitude":46.227638,"longitude":2.213749,"name":"France","updatedAt":"2026-11-22T00:04:58.751Z","version":1}"#
        )
        location.distanceMeters = 1250.5
        #expect(try encode(location).contains(#""distanceMeters":1250.5"#))
    }

    @Test func pageAndProblemGolden() throws {
        let page = Page<Game>(items: [], nextCursor: nil)
        #expect(try encode(page) == #"{"items":[]}"#)
        let problem = Problem(
            title: "Unprocessable Content", status: 422, detail: "1 invalid field", instance: "/v1/games", code: "validationFailed",
            errors: [FieldError(pointer: "/name", code: "tooLong", message: "Too long.")])
        #expect(
            try encode(problem)
                == #"{"code":"validationFailed","detail":"1 invalid field","errors":[{"code":"tooLong","message":"Too long.","pointer":"/name"}],"instance":"/v1/games","status":422,"title":"Unprocessable Content","type":"about:blank"}"#
        )
    }

    @Test func inputsDecodeWithDefaults() throws {
        let input = try CatalogJSON.makeDecoder().decode(PlayableItemInput.self, from: Data(#"{"title":"T","streamURL":"https://e.com/a.m3u8"}"#.utf8))
        #expect(input.description == "")
        #expect(input.thumbnailURL == nil)
        #expect(try encode(GameInput(name: "N", imageName: "n")) == #"{"description":"","imageName":"n","name":"N"}"#)
    }
}

@Suite struct TimestampTests {
    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"), (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"), (4_102_444_799_999, "2099-12-31T23:59:59.999Z"), (1_795_305_898_751, "2026-11-22T00:04:58.751Z"),
    ])
    func formatsAndParsesMilliseconds(_ milliseconds: Int64, _ text: String) {
        let date = Timestamp.date(milliseconds: milliseconds)
        #expect(Timestamp.string(from: date) == text)
        #expect(Timestamp.date(from: text).map(Timestamp.milliseconds) == milliseconds)
    }

    @Test func parsesOffsetsAndRejectsJunk() {
        #expect(Timestamp.date(from: "2026-11-22T02:04:58.751+02:00").map(Timestamp.milliseconds) == 1_795_305_898_751)
        #expect(Timestamp.date(from: "2026-11-22t00:04:58z").map(Timestamp.milliseconds) == 1_795_305_898_000)
        for junk in ["", "2026-11-21", "2026-13-01T00:00:00Z", "2026-11-21T23:51:38.Z", "2026-11-21T23:51:38", "2026-11-21 23:51:38Z", "2026-11-22T00:04:58.751Zjunk"] {
            #expect(Timestamp.date(from: junk) == nil, "\(junk)")
        }
    }
}

@Suite struct ValidationTests {
    @Test func identifiersAreCanonicalLowercase() {
        #expect(CatalogID("4B7F8C2E-0F7A-4C64-9A55-0E6BB1C4A6D2")?.rawValue == "4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2")
        for junk in ["", "4b7f8c2e0f7a4c649a550e6bb1c4a6d2", "{4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2}", "zb7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2"] {
            #expect(CatalogID(junk) == nil, "\(junk)")
        }
        let generated = CatalogID()
        #expect(generated.rawValue == generated.rawValue.lowercased())
        #expect(generated != CatalogID())
    }

    @Test func sharedRules() {
        #expect(Rules.text("", length: 1...200)?.code == .tooShort)
        #expect(Rules.text(String(repeating: "é", count: 200), length: 1...200) == nil, "length counts characters, not bytes")
        #expect(Rules.text(String(repeating: "x", count: 201), length: 1...200)?.code == .tooLong)
        #expect(Rules.text("a\u{0}b", length: 1...200)?.code == .invalidFormat, "NUL would truncate the stored text")
        #expect(Rules.text("two\nlines", length: 1...200)?.code == .invalidFormat)
        #expect(Rules.text("two\nlines\tand a tab", length: 0...5000, multiline: true) == nil)
        #expect(Rules.text("bell\u{7}", length: 0...5000, multiline: true)?.code == .invalidFormat)
        #expect(Rules.webURL("https://example.com/a.m3u8") == nil)
        #expect(Rules.webURL("HTTP://EXAMPLE.COM/") == nil)
        for bad in ["ftp://example.com/a", "/relative", "https://", "javascript:alert(1)", "https://exa mple.com/"] {
            #expect(Rules.webURL(bad)?.code == .invalidURL, "\(bad)")
        }
        #expect(Rules.number(90.0000001, in: -90...90)?.code == .outOfRange)
        #expect(Rules.number(.nan, in: -90...90)?.code == .outOfRange)
        #expect(Rules.countryCode("FR") == nil)
        #expect(Rules.countryCode("fr")?.code == .invalidFormat)
        #expect(Rules.countryCode("FRA")?.code == .invalidFormat)
        #expect(Rules.assetName("space-invaders_2.png") == nil)
        #expect(Rules.assetName("../x")?.code == .invalidFormat)
    }

    @Test func textLimitsCountBytesAndMarks() {
        // One "character" of 50,000 combining marks: refused by bytes before anything is counted.
        let zalgo = "a" + String(repeating: "\u{301}", count: 50_000)
        #expect(zalgo.count == 1)
        #expect(Rules.text(zalgo, length: 1...100)?.code == .tooLong)
        #expect(Rules.text(zalgo, length: 1...100)?.message == "Must be at most 100 characters and 400 bytes of UTF-8.")
        // Within the bytes, a stack of nine marks on one character is refused; eight pass.
        #expect(Rules.text("a" + String(repeating: "\u{301}", count: 9), length: 1...100)?.code == .invalidFormat)
        #expect(Rules.text("a" + String(repeating: "\u{301}", count: 8) + "b\u{301}", length: 1...100) == nil)
        // 200 four-byte characters fill 800 bytes exactly.
        #expect(Rules.text(String(repeating: "😀", count: 200), length: 1...200) == nil)
        #expect(Rules.text(String(repeating: "😀", count: 200) + "x", length: 1...200)?.code == .tooLong)
        #expect(Rules.webURL("https://e.com/" + String(repeating: "é", count: 2040))?.code == .tooLong)
    }

    @Test func singleLineTextRefusesInvisibleFormatting() {
        for scalar: UInt32 in [0x202A, 0x202E, 0x2066, 0x2069, 0x200B, 0x2060, 0xFEFF, 0x2028, 0x2029] {
            let text = "ad" + String(Character(Unicode.Scalar(scalar)!)) + "min"
            #expect(Rules.text(text, length: 1...50)?.code == .invalidFormat, "U+\(String(scalar, radix: 16))")
            #expect(Rules.text(text, length: 0...5000, multiline: true) == nil, "multi-line text keeps U+\(String(scalar, radix: 16))")
        }
        #expect(Rules.text("ad\u{200D}min", length: 1...50)?.code == .invalidFormat, "a joiner between Latin letters")
        #expect(Rules.text("\u{200C}admin", length: 1...50)?.code == .invalidFormat, "a leading joiner")
        #expect(Rules.text("👩\u{200D}", length: 1...50)?.code == .invalidFormat, "a trailing joiner")
        #expect(Rules.text("👩\u{200D}💻 coder", length: 1...50) == nil, "an emoji sequence")
        #expect(Rules.text("می\u{200C}خواهم", length: 1...50) == nil, "Persian's non-joiner")
        #expect(Rules.text("क्\u{200D}ष", length: 1...50) == nil, "a joiner after a virama")
        #expect(Rules.email("ana\u{200B}@example.com")?.code == .invalidFormat)
    }

    @Test func storedTextIsNFC() {
        #expect(Rules.normalized("Cafe\u{301}") == "Caf\u{E9}")
        #expect(Array(Rules.normalized("Cafe\u{301}").utf8) == Array("Caf\u{E9}".utf8))
        #expect(Rules.normalized("plain ASCII") == "plain ASCII")
        #expect(Array(Rules.normalized("\u{212B}").utf8) == Array("\u{C5}".utf8), "the Angstrom sign is the letter Å")
    }

    @Test func inputsReportEveryFailingField() {
        let input = PlayableItemInput(title: "", description: "", streamURL: URL(string: "ftp://e.com/a")!, durationSeconds: -1)
        #expect(input.validationErrors().map(\.pointer) == ["/title", "/streamURL", "/durationSeconds"])
        #expect(LocationInput(name: "X", countryCode: "xx", latitude: 0, longitude: 200).validationErrors().map(\.pointer) == ["/countryCode", "/longitude"])
        #expect(GameInput(name: "Joust", imageName: "joust").validationErrors().isEmpty)
    }
}

/// Exports made before accounts still decode: no owner, public, author not deleted.
@Suite struct EarlierExportTests {
    @Test func recordsWithoutAccountsDecode() throws {
        let json = """
            {"records":[
            {"type":"playlist","data":{"id":"4b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2","title":"Old","description":"","entries":[],
             "createdAt":"2025-01-31T12:00:00.000Z","updatedAt":"2025-01-31T12:00:00.000Z","version":1}},
            {"type":"comment","data":{"id":"5b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2","playableItemId":"6b7f8c2e-0f7a-4c64-9a55-0e6bb1c4a6d2",
             "author":"Ana","body":"Hi","deleted":false,"replyCount":0,
             "createdAt":"2025-01-31T12:00:00.000Z","updatedAt":"2025-01-31T12:00:00.000Z","version":1}}]}
            """
        let request = try CatalogJSON.makeDecoder().decode(ImportRequest.self, from: Data(json.utf8))
        guard case let .playlist(playlist) = request.records[0], case let .comment(comment) = request.records[1] else {
            Issue.record("wrong record types")
            return
        }
        #expect(playlist.visibility == .public && playlist.ownerId == nil)
        #expect(comment.authorDeleted == false && comment.authorId == nil && comment.author == "Ana")
    }
}
