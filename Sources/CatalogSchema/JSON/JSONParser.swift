/// A strict recursive-descent JSON parser (RFC 8259) over UTF-8 bytes, producing
/// ``JSONValue``. Errors carry the byte offset.
struct JSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func document() throws(JSONValue.ParseError) -> JSONValue {
        let value = try self.value()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected content after the JSON value") }
        return value
    }

    private func fail(_ reason: String) -> JSONValue.ParseError {
        JSONValue.ParseError(offset: index, reason: reason)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
            index += 1
        }
    }

    private mutating func value() throws(JSONValue.ParseError) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw fail("unexpected character")
        }
    }

    private mutating func literal(_ word: String) throws(JSONValue.ParseError) {
        let expected = Array(word.utf8)
        guard bytes.count - index >= expected.count, bytes[index..<(index + expected.count)].elementsEqual(expected) else {
            throw fail("invalid literal")
        }
        index += expected.count
    }

    private mutating func enter() throws(JSONValue.ParseError) {
        depth += 1
        guard depth <= JSONValue.maxDepth else { throw fail("nested deeper than \(JSONValue.maxDepth) levels") }
        index += 1
        skipWhitespace()
    }

    /// After an element: true when the container continues (`,`), false when it closed.
    private mutating func next(closing: UInt8) throws(JSONValue.ParseError) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        if bytes[index] == UInt8(ascii: ",") {
            index += 1
            return true
        }
        guard bytes[index] == closing else { throw fail("expected ',' or '\(Character(UnicodeScalar(closing)))'") }
        index += 1
        depth -= 1
        return false
    }

    private mutating func object() throws(JSONValue.ParseError) -> JSONValue {
        try enter()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object([:])
        }
        // The document itself has room for its members from the start: growing from one
        // to eight members rehashed them three times (a quarter of parsing a small body).
        // Nested objects grow as they fill, so that a body of many small objects holds
        // no more than they need.
        var members = depth == 1 ? [String: JSONValue](minimumCapacity: 8) : [:]
        repeat {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            let name = try string()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            guard members.updateValue(try value(), forKey: name) == nil else { throw fail("duplicate member '\(name.prefix(64))'") }
            guard members.count <= JSONValue.maxMembers else { throw fail("an object of more than \(JSONValue.maxMembers) members") }
        } while try next(closing: UInt8(ascii: "}"))
        return .object(members)
    }

    private mutating func array() throws(JSONValue.ParseError) -> JSONValue {
        try enter()
        var elements: [JSONValue] = []
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        repeat {
            elements.append(try value())
        } while try next(closing: UInt8(ascii: "]"))
        return .array(elements)
    }

    private mutating func string() throws(JSONValue.ParseError) -> String {
        index += 1
        let start = index
        // Fast path: a string without escapes is a slice of the input.
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 { index += 1 }
        guard index < bytes.count else { throw fail("unterminated string") }
        if bytes[index] == UInt8(ascii: "\"") {
            let end = index
            guard let text = bytes.withUnsafeBufferPointer({ Self.text(UnsafeBufferPointer(rebasing: $0[start..<end])) }) else {
                throw fail("invalid UTF-8")
            }
            index += 1
            return text
        }
        var decoded = Array(bytes[start..<index])
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { break }
            guard byte >= 0x20 else { throw fail("control character in string") }
            guard byte == UInt8(ascii: "\\") else {
                decoded.append(byte)
                continue
            }
            guard index < bytes.count else { throw fail("unterminated escape") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0C)
            case UInt8(ascii: "n"): decoded.append(0x0A)
            case UInt8(ascii: "r"): decoded.append(0x0D)
            case UInt8(ascii: "t"): decoded.append(0x09)
            case UInt8(ascii: "u"): decoded.append(contentsOf: try unicodeEscape())
            default: throw fail("invalid escape")
            }
        }
        guard let text = decoded.withUnsafeBufferPointer(Self.text) else { throw fail("invalid UTF-8") }
        return text
    }

    /// `bytes` as a string when they are valid UTF-8. ASCII (found eight bytes at a time)
    /// is taken as it is; the standard library's validating initializer, which anything
    /// else goes through, looks up generic metadata on every call (about 650
    /// instructions a string).
    private static func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard isASCII(bytes) else { return String(validating: bytes, as: UTF8.self) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether no byte of `bytes` has its high bit set.
    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var offset = 0
        var seen: UInt64 = 0
        while offset + 8 <= bytes.count {
            seen |= raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < bytes.count {
            seen |= UInt64(base[offset])
            offset += 1
        }
        return seen & 0x8080_8080_8080_8080 == 0
    }

    /// The UTF-8 of a `\uXXXX` escape (after the `u`), joining surrogate pairs.
    private mutating func unicodeEscape() throws(JSONValue.ParseError) -> [UInt8] {
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw fail("unpaired surrogate")
            }
            index += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        }
        guard let unicode = Unicode.Scalar(scalar) else { throw fail("unpaired surrogate") }
        return Array(String(Character(unicode)).utf8)
    }

    private mutating func hex4() throws(JSONValue.ParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw fail("invalid \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func number() throws(JSONValue.ParseError) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        if index < bytes.count, bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if skipDigits() == 0 {
            throw fail("invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard skipDigits() > 0 else { throw fail("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard skipDigits() > 0 else { throw fail("invalid number") }
        }
        guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)), value.isFinite else {
            throw fail("number out of range")
        }
        return value
    }

    private mutating func skipDigits() -> Int {
        let from = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
        return index - from
    }
}
