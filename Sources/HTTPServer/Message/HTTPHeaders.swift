#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The header fields of a request, kept as the raw bytes of the request head plus the
/// position of each field, so that parsing creates no `String` per line. Values are
/// decoded only when asked for.
public struct HTTPHeaders: Sendable, Sequence {
    struct Field: Sendable {
        var nameStart: Int32
        var nameEnd: Int32
        var valueStart: Int32
        var valueEnd: Int32
    }

    let storage: [UInt8]
    let fields: [Field]

    init(storage: [UInt8], fields: [Field]) {
        self.storage = storage
        self.fields = fields
    }

    /// Creates headers from name/value pairs (useful in tests and clients).
    public init(_ pairs: [(String, String)]) {
        var storage: [UInt8] = []
        var fields: [Field] = []
        for (name, value) in pairs {
            let nameStart = Int32(storage.count)
            storage.append(contentsOf: name.utf8)
            let nameEnd = Int32(storage.count)
            storage.append(contentsOf: value.utf8)
            fields.append(Field(nameStart: nameStart, nameEnd: nameEnd, valueStart: nameEnd, valueEnd: Int32(storage.count)))
        }
        self.init(storage: storage, fields: fields)
    }

    /// The number of fields, counting repeated names separately.
    public var count: Int { fields.count }

    /// The first value of the field named `name` (case-insensitive), or `nil`.
    public subscript(name: String) -> String? {
        guard let index = firstIndex(of: name) else { return nil }
        return value(at: index)
    }

    /// Every value of the fields named `name`, in order.
    public func values(for name: String) -> [String] {
        var result: [String] = []
        for index in fields.indices where nameEquals(index, name) {
            result.append(value(at: index))
        }
        return result
    }

    /// Every value of the fields named `name`, in order, as the bytes received (no
    /// `String` is made: for values that are secrets, or that may be large).
    public func rawValues(for name: String) -> [ArraySlice<UInt8>] {
        var values: [ArraySlice<UInt8>] = []
        for index in fields.indices where nameEquals(index, name) { values.append(valueBytes(at: index)) }
        return values
    }

    /// The fields as (name, value) pairs, in the order received.
    public func makeIterator() -> AnyIterator<(name: String, value: String)> {
        var index = 0
        return AnyIterator {
            guard index < fields.count else { return nil }
            defer { index += 1 }
            return (name(at: index), value(at: index))
        }
    }

    func firstIndex(of name: String) -> Int? {
        fields.indices.first { nameEquals($0, name) }
    }

    func name(at index: Int) -> String {
        let field = fields[index]
        return String(decoding: storage[Int(field.nameStart)..<Int(field.nameEnd)], as: UTF8.self)
    }

    func value(at index: Int) -> String {
        let field = fields[index]
        return String(decoding: storage[Int(field.valueStart)..<Int(field.valueEnd)], as: UTF8.self)
    }

    func valueBytes(at index: Int) -> ArraySlice<UInt8> {
        let field = fields[index]
        return storage[Int(field.valueStart)..<Int(field.valueEnd)]
    }

    func nameEquals(_ index: Int, _ name: String) -> Bool {
        let field = fields[index]
        let start = Int(field.nameStart)
        let length = Int(field.nameEnd) - start
        guard name.utf8.count == length else { return false }
        // Over both sides' contiguous bytes: stepping through a `UTF8View` costs several
        // times more. Names are ASCII, and a name given is native (or small) UTF-8.
        return storage.withUnsafeBufferPointer { stored in
            name.utf8.withContiguousStorageIfAvailable { wanted in
                for offset in 0..<length where ASCII.lowercase(stored[start + offset]) != ASCII.lowercase(wanted[offset]) { return false }
                return true
            } ?? zip(stored[start..<start + length], name.utf8).allSatisfy { ASCII.lowercase($0) == ASCII.lowercase($1) }
        }
    }
}

/// Byte classification used by the parser and the writer, and the case-insensitive
/// comparison of ASCII names and tokens (header names, media types, codings).
public enum ASCII {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A

    @inline(__always) static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    /// Whether `bytes` begin with `prefix` (lowercase ASCII) in any case; with `whole`,
    /// whether they are it.
    static func startsIgnoringCase(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ prefix: StaticString, whole: Bool) -> Bool {
        prefix.withUTF8Buffer { prefix in
            guard whole ? bytes.count == prefix.count : bytes.count >= prefix.count else { return false }
            return zip(bytes, prefix).allSatisfy { lowercase($0) == $1 }
        }
    }

    /// As ``startsIgnoringCase(_:_:whole:)`` for a string, over its contiguous UTF-8
    /// where it has it (native strings do; stepping through a `UTF8View` costs far more).
    public static func startsIgnoringCase(_ text: String, _ prefix: StaticString, whole: Bool) -> Bool {
        if let result = text.utf8.withContiguousStorageIfAvailable({ startsIgnoringCase($0[...], prefix, whole: whole) }) { return result }
        return Array(text.utf8).withUnsafeBufferPointer { startsIgnoringCase($0[...], prefix, whole: whole) }
    }

    /// RFC 9110 `tchar`: the characters of a token such as a method or field name.
    @inline(__always) static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"),
            UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Bytes allowed in a request target (RFC 3986 unreserved, sub-delims, ":", "@", "/", "?", "%").
    @inline(__always) static func isTarget(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "%"):
            true
        default: false
        }
    }

    /// RFC 9110 field-value bytes: VCHAR, obs-text, SP and HTAB.
    @inline(__always) static func isFieldValue(_ byte: UInt8) -> Bool {
        byte >= 0x20 ? byte != 0x7F : byte == tab
    }

    /// The first position in `range` of `bytes` that is no field-value byte, or `nil`.
    /// Eight bytes at a time while none is a control character or DEL (the common case:
    /// a value with no tab), then byte by byte.
    static func firstNonFieldValue(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        var index = range.lowerBound
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while index + 8 <= range.upperBound {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                // A byte below 0x20 (obs-text's high bit keeps it out), or one equal to 0x7F.
                let below = (word &- ones &* 0x20) & ~word & highs
                let flipped = word ^ (ones &* 0x7F)
                let del = (flipped &- ones) & ~flipped & highs
                if below | del != 0 { break }
                index += 8
            }
        }
        while index < range.upperBound {
            if !isFieldValue(bytes[index]) { return index }
            index += 1
        }
        return nil
    }

    @inline(__always) static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
