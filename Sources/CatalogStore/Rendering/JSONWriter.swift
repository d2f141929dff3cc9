import CatalogModels

/// Appends JSON text to a byte array, byte for byte as `CatalogJSON.makeEncoder()`
/// writes it (sorted keys, unescaped slashes, numbers as Swift prints them without a
/// trailing `.0`), so hot read paths can render rows without building models.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 512) {
        bytes.reserveCapacity(capacity)
    }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func raw(_ other: [UInt8]) {
        bytes.append(contentsOf: other)
    }

    mutating func byte(_ value: UInt8) {
        bytes.append(value)
    }

    mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { string(utf8: $0) }
    }

    /// A string literal from UTF-8 bytes, escaped as the encoder escapes.
    mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        var start = 0
        var index = 0
        let count = utf8.count
        while index < count {
            let byte = utf8[index]
            if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
            escape(byte)
            index += 1
            start = index
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<count]))
        bytes.append(UInt8(ascii: "\""))
    }

    /// An RFC 3339 millisecond timestamp string.
    mutating func timestamp(milliseconds: Int64) {
        bytes.append(UInt8(ascii: "\""))
        Timestamp.appendUTF8(milliseconds: milliseconds, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): raw("\\\"")
        case UInt8(ascii: "\\"): raw("\\\\")
        case 0x08: raw("\\b")
        case 0x0C: raw("\\f")
        case 0x0A: raw("\\n")
        case 0x0D: raw("\\r")
        case 0x09: raw("\\t")
        default:
            let hex = Array("0123456789abcdef".utf8)
            raw("\\u00")
            bytes.append(hex[Int(byte >> 4)])
            bytes.append(hex[Int(byte & 0x0F)])
        }
    }

    mutating func integer(_ value: Int64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func number(_ value: Double) {
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }
}
