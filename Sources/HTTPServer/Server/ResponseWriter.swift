#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Serializes responses into a connection's output buffer: status line, the handler's
/// headers, `Content-Length`, `Date`, `X-Request-Id`, the server's fixed fields,
/// `Connection` and the body, so that head and body leave in one `write`.
enum ResponseWriter {
    /// The smallest body sent from its own array rather than copied after the head
    /// (``ByteBuffer/append(splicing:)``): below it, the copy costs less than a piece of a gathered write.
    static let splicedBody = 1_024

    /// Pre-rendered status lines for every standard code, indexed by code.
    private static let statusLines: [[UInt8]] = (0..<600).map { code in
        Array("HTTP/1.1 \(code) \(HTTPStatus.standardReason(code))\r\n".utf8)
    }

    static func write(
        _ response: HTTPResponse, into out: ByteBuffer, omitBody: Bool, keepAlive: Bool,
        version: HTTPVersion, requestID: String, date: DateCache, fixedFields: [UInt8], streaming: Bool = false,
        splicesBody: Bool = false
    ) {
        let status = response.status
        if status.code >= 100, status.code < 600, status.reasonPhrase == HTTPStatus.standardReason(status.code) {
            out.append(statusLines[status.code])
        } else {
            out.append("HTTP/1.1 \(status.code) ")
            appendSanitized(status.reasonPhrase, to: out)
            out.append("\r\n")
        }
        if let cacheControl = response.cacheControl {
            out.append(cacheControlPrefix)
            appendSanitized(cacheControl, to: out)
            out.append(byte: ASCII.cr)
            out.append(byte: ASCII.lf)
        }
        appendFields(response.headers, to: out)
        if streaming {
            // A body of unknown length: chunked, or (HTTP/1.0) until the connection closes.
            if version != .http1_0 { out.append(chunkedField) }
        } else if !status.forbidsBody {
            out.append(contentLengthPrefix)
            out.append(decimal: response.file?.count ?? response.body.count)
            out.append(byte: ASCII.cr)
            out.append(byte: ASCII.lf)
        }
        out.append(date.line)
        out.append(requestIDPrefix)
        out.append(requestID)
        out.append(byte: ASCII.cr)
        out.append(byte: ASCII.lf)
        out.append(fixedFields)
        if !keepAlive {
            out.append(connectionClose)
        } else if version == .http1_0 {
            out.append(connectionKeepAlive)
        }
        out.append(byte: ASCII.cr)
        out.append(byte: ASCII.lf)
        if !omitBody && !status.forbidsBody && !streaming {
            // A large body leaves from its own array, gathered with the head in one write.
            if splicesBody && response.body.count >= splicedBody { out.append(splicing: response.body) } else { out.append(response.body) }
        }
    }

    /// Appends the interim response `status` with `headers` (no body, no fields of the
    /// server's own).
    static func writeInterim(_ status: HTTPStatus, headers: [(name: String, value: String)], into out: ByteBuffer) {
        out.append("HTTP/1.1 \(status.code) ")
        appendSanitized(status.reasonPhrase, to: out)
        out.append("\r\n")
        appendFields(headers, to: out)
        out.append(byte: ASCII.cr)
        out.append(byte: ASCII.lf)
    }

    /// The interim response sent before reading a body the client holds back with `Expect: 100-continue`.
    static let continueLine: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
    /// Sent to a connection over the server's limit before it is closed.
    static let overloaded = refusal(detail: "The server is at its connection limit.", code: "tooManyConnections")
    /// Sent to a connection over its client address's limit before it is closed.
    static let tooManyFromAddress = refusal(detail: "Too many connections from this address.", code: "tooManyConnections")

    private static func refusal(detail: String, code: String) -> [UInt8] {
        let body = #"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"\#(detail)","code":"\#(code)"}"#
        return Array(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nContent-Length: \(body.utf8.count)\r\nCache-Control: no-store\r\nConnection: close\r\nRetry-After: 1\r\n\r\n\(body)"
                .utf8)
    }

    private static let chunkedField: [UInt8] = Array("Transfer-Encoding: chunked\r\n".utf8)
    private static let contentLengthPrefix: [UInt8] = Array("Content-Length: ".utf8)
    private static let cacheControlPrefix: [UInt8] = Array("Cache-Control: ".utf8)
    private static let requestIDPrefix: [UInt8] = Array("X-Request-Id: ".utf8)
    private static let connectionClose: [UInt8] = Array("Connection: close\r\n".utf8)
    private static let connectionKeepAlive: [UInt8] = Array("Connection: keep-alive\r\n".utf8)

    /// Appends `fields`, a line each.
    @inline(__always)
    private static func appendFields(_ fields: [(name: String, value: String)], to out: ByteBuffer) {
        for (name, value) in fields {
            appendSanitized(name, to: out)
            out.append(byte: ASCII.colon)
            out.append(byte: ASCII.space)
            appendSanitized(value, to: out)
            out.append(byte: ASCII.cr)
            out.append(byte: ASCII.lf)
        }
    }

    /// Appends `text`, replacing control characters so a header can never be split.
    private static func appendSanitized(_ text: String, to out: ByteBuffer) {
        var text = text
        text.withUTF8 { bytes in
            if !hasControl(bytes) {
                out.append(UnsafeRawBufferPointer(bytes))
            } else {
                for byte in bytes { out.append(byte: byte < 0x20 || byte == 0x7F ? ASCII.space : byte) }
            }
        }
    }

    /// Whether `bytes` hold a control character (below 0x20, or 0x7F), eight bytes a step:
    /// a word has a byte below 0x20 when subtracting 0x20 from each borrows into a byte
    /// whose top bit was clear, and a 0x7F when XOR with 0x7F leaves a zero byte.
    @inline(__always)
    static func hasControl(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let deletes = word ^ (ones &* 0x7F)
                if ((word &- ones &* 0x20) & ~word | (deletes &- ones) & ~deletes) & highs != 0 { return true }
                index += 8
            }
        }
        while index < bytes.count {
            if bytes[index] < 0x20 || bytes[index] == 0x7F { return true }
            index += 1
        }
        return false
    }
}

/// The `Date` header line, re-rendered at most once per second per event loop.
final class DateCache {
    private(set) var line: [UInt8] = []
    private var second: time_t = -1

    init() { refresh() }

    func refresh() {
        let now = time(nil)
        guard now != second else { return }
        second = now
        line = Array("Date: \(HTTPDate.format(now))\r\n".utf8)
    }
}

/// HTTP-dates (RFC 9110 §5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
public enum HTTPDate {
    /// The HTTP-date of `seconds` since 1970.
    public static func format(_ seconds: Int) -> String {
        var now = time_t(seconds)
        var parts = tm()
        gmtime_r(&now, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
