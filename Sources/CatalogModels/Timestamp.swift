import Foundation

/// RFC 3339 timestamps in UTC with millisecond precision, e.g. `2026-11-21T23:55:51.123Z`:
/// the only date format on the wire.
public enum Timestamp {
    /// Milliseconds since 1970 for `date`, rounded to the nearest millisecond.
    public static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// The date `milliseconds` after 1970.
    public static func date(milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Formats `date` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    public static func string(from date: Date) -> String {
        string(milliseconds: milliseconds(date))
    }

    /// Formats the instant `total` milliseconds after 1970 as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    public static func string(milliseconds total: Int64) -> String {
        var bytes: [UInt8] = []
        appendUTF8(milliseconds: total, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the UTF-8 of ``string(milliseconds:)`` to `bytes` (for writers that
    /// render JSON without building strings).
    public static func appendUTF8(milliseconds total: Int64, to bytes: inout [UInt8]) {
        var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &storage) { raw in
            let buffer = raw.bindMemory(to: UInt8.self)
            guard let start = buffer.baseAddress else { return }
            bytes.append(contentsOf: UnsafeBufferPointer(start: start, count: format(milliseconds: total, into: start)))
        }
    }

    /// The most bytes ``format(milliseconds:into:)`` writes.
    public static let maxFormattedLength = 32

    /// Writes the UTF-8 of ``string(milliseconds:)`` at `start`, which must have room
    /// for ``maxFormattedLength`` bytes, without allocating (the hot path of rendering
    /// lists). - Returns: how many bytes it wrote (24 for years 0…9999).
    public static func format(milliseconds total: Int64, into start: UnsafeMutablePointer<UInt8>) -> Int {
        let millis = Int(((total % 1000) + 1000) % 1000)
        let seconds = (total - Int64(millis)) / 1000
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        let (year, month, day) = civil(fromDays: days)
        var offset = 0
        @inline(__always) func put(_ byte: UInt8) {
            start[offset] = byte
            offset += 1
        }
        @inline(__always) func two(_ value: Int) {
            put(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value / 10))
            put(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10))
        }
        if (0...9999).contains(year) {
            two(year / 100)
            two(year % 100)
        } else {
            // Outside 0…9999: at least four digits, with the sign.
            let text = Array(String(year).utf8)
            let digits = year < 0 ? text.count - 1 : text.count
            if year < 0 { put(UInt8(ascii: "-")) }
            for _ in digits..<max(4, digits) { put(UInt8(ascii: "0")) }
            for byte in text.dropFirst(year < 0 ? 1 : 0) { put(byte) }
        }
        put(UInt8(ascii: "-")); two(month); put(UInt8(ascii: "-")); two(day); put(UInt8(ascii: "T"))
        two(secondOfDay / 3600); put(UInt8(ascii: ":")); two(secondOfDay / 60 % 60); put(UInt8(ascii: ":")); two(secondOfDay % 60)
        put(UInt8(ascii: ".")); put(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: millis / 100)); two(millis % 100); put(UInt8(ascii: "Z"))
        return offset
    }

    /// Parses RFC 3339 (`T` or `t`, `Z` or an offset, any number of fractional digits).
    public static func date(from text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                guard index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 else { return nil }
                value = value * 10 + Int(bytes[index] - 48)
            }
            return value
        }
        guard let year = number(0..<4), bytes[4] == UInt8(ascii: "-"), let month = number(5..<7), bytes[7] == UInt8(ascii: "-"),
            let day = number(8..<10), bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            let hour = number(11..<13), bytes[13] == UInt8(ascii: ":"), let minute = number(14..<16),
            bytes[16] == UInt8(ascii: ":"), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offset = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard let hours = number(index + 1..<index + 3), index + 3 < bytes.count, bytes[index + 3] == UInt8(ascii: ":"),
                let minutes = number(index + 4..<index + 6)
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (bytes[index] == UInt8(ascii: "+") ? 1 : -1)
            index += 6
        default:
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = self.days(fromCivil: year, month, day)
        let seconds = Double(days) * 86_400 + Double(hour * 3600 + minute * 60 + second - offset) + fraction
        return Date(timeIntervalSince1970: seconds)
    }

    /// Howard Hinnant's days-from-civil algorithm (proleptic Gregorian calendar).
    private static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civil(fromDays days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// The JSON encoder and decoder configured for the wire format: RFC 3339 millisecond
/// UTC dates, unescaped slashes, keys in sorted order (stable output byte for byte),
/// absent optionals omitted.
public enum CatalogJSON {
    /// A new encoder for the wire format.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.string(from: date))
        }
        return encoder
    }

    /// A new decoder for the wire format.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = Timestamp.date(from: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not an RFC 3339 timestamp: \(text)")
            }
            return date
        }
        return decoder
    }
}
