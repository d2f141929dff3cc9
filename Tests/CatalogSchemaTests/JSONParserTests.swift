import Foundation
import Testing

@testable import CatalogSchema

/// The strict body parser: RFC 8259 exactly, plus duplicate names and depth refused.
@Suite struct JSONParserTests {
    @Test func parsesEveryKindOfValue() throws {
        let text = #" {"s":"a\"b\\c\/d\n\u00e9\ud83d\ude00","n":-12.5e2,"z":0,"t":true,"f":false,"x":null,"a":[1,[],{}],"o":{"k":"v"}} "#
        let value = try JSONValue.parse(Array(text.utf8))
        #expect(
            value
                == .object([
                    "s": .string("a\"b\\c/d\né😀"), "n": .number(-1250), "z": .number(0), "t": .bool(true), "f": .bool(false), "x": .null,
                    "a": .array([.number(1), .array([]), .object([:])]), "o": .object(["k": .string("v")]),
                ]))
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "'a'", "01", "1.", ".5", "-", "1e", "+1", "NaN", "Infinity",
        "1e999", "tru", "nul", "\"abc", "\"a\u{1}b\"", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "[1] [2]", "{\"a\":1,\"a\":2}",
    ])
    func rejectsMalformedDocuments(_ text: String) {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array(text.utf8)) }
    }

    @Test func rejectsInvalidUTF8AndExcessiveDepth() throws {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) }
        // A bad byte inside the words read eight bytes at a time, at either end of one, and
        // in the bytes after the last whole word.
        let sixteen = Array("abcdefghijklmnop".utf8)
        for offset in [0, 7, 8, 15, 16] {
            var bytes = sixteen
            bytes.insert(0xFF, at: offset)
            #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse([0x22] + bytes + [0x22]) }
        }
        // A bad byte after eleven ASCII ones, in a name and in a value, unescaped and beside
        // an escape; a valid two-byte letter there is kept.
        let ascii = Array("abcdefghijk".utf8)
        for bad: [UInt8] in [[0xFF], [0xC3, 0x28], [0xE2, 0x82], [0xED, 0xA0, 0x80]] {
            let text = [0x22] + ascii + bad + [0x22]
            let escaped = [0x22] + ascii + [0x5C, 0x6E] + bad + [0x22]
            for string in [text, escaped] {
                #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(string) }
                #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse([0x7B] + string + Array(":1}".utf8)) }
            }
        }
        #expect(try JSONValue.parse([0x22] + ascii + [0xC3, 0xA9, 0x22]) == .string("abcdefghijké"))
        #expect(try JSONValue.parse(Array("{\"abcdefghijklmnopq\":\"x\"}".utf8)) == .object(["abcdefghijklmnopq": .string("x")]))
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array(deep.utf8)) }
        let limit = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect((try? JSONValue.parse(Array(limit.utf8))) != nil)
    }

    @Test func agreesWithFoundationOnValidDocuments() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let object: [String: Any] = [
                "title": String((0..<Int.random(in: 0...40, using: &generator)).map { _ in "aé\"\\/\n\t😀x ".randomElement(using: &generator)! }),
                "number": Double.random(in: -1e6...1e6, using: &generator), "integer": Int.random(in: -1000...1000, using: &generator),
                "flag": Bool.random(using: &generator), "list": [1, 2.5, "three"],
            ]
            let data = try JSONSerialization.data(withJSONObject: object)
            guard case let .object(parsed) = try JSONValue.parse(Array(data)) else {
                Issue.record("not an object")
                continue
            }
            #expect(parsed["title"] == .string(object["title"] as! String))
            #expect(parsed["number"] == .number(object["number"] as! Double))
            #expect(parsed["integer"] == .number(Double(object["integer"] as! Int)))
            #expect(parsed["flag"] == .bool(object["flag"] as! Bool))
        }
    }
}
