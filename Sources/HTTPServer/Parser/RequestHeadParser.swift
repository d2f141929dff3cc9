#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An incremental parser for one request head (request line and header fields).
///
/// Feed it the bytes received so far for the current request, starting at the request's
/// first byte, each time more arrive. It resumes where it stopped, never copies the input
/// until the head is complete, and throws as soon as a limit or a syntax rule is broken,
/// so an oversized line is refused without being buffered.
struct RequestHeadParser {
    let limits: ParserLimits
    private var scanned = 0
    private var lineStart = 0
    private var requestLine: RequestLine?
    private var fields: [HTTPHeaders.Field] = []

    /// Offsets and enumerations only: an optional of it holding a `String` was destroyed
    /// through the runtime's generic witnesses, three times a request.
    private struct RequestLine {
        var method: HTTPMethod?
        var methodRange: Range<Int>
        var version: HTTPVersion
        var path: Range<Int>
        var query: Range<Int>?
    }

    init(limits: ParserLimits) {
        self.limits = limits
        fields.reserveCapacity(16)
    }

    /// Whether any byte of a head has been examined since the last reset.
    var hasStarted: Bool { scanned > 0 }

    /// Forgets the current head so the next call starts a new request.
    mutating func reset() {
        scanned = 0
        lineStart = 0
        requestLine = nil
        fields.removeAll(keepingCapacity: true)
    }

    /// How many bytes the head ``parse(_:)`` last returned occupied: read it right after
    /// a head is returned, before ``reset()`` (it is not cleared).
    private(set) var headLength = 0

    /// Parses as far as `bytes` allows.
    /// - Returns: the head (its length in ``headLength``), or `nil` when more bytes are
    ///   needed. (Not a tuple with the length: an optional tuple was destroyed through the
    ///   runtime's generic witnesses, some 2,000 instructions a request.)
    mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(HTTPError) -> RequestHead? {
        guard let base = bytes.baseAddress else { return nil }
        let count = bytes.count
        var position = scanned
        while position < count {
            guard let found = memchr(base + position, Int32(ASCII.lf), count - position) else { break }
            let lf = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base
            guard lf > lineStart, bytes[lf - 1] == ASCII.cr else { throw .bareLineFeed }
            let line = lineStart..<(lf - 1)
            try checkLength(of: line.count, headEnd: lf + 1)
            lineStart = lf + 1
            position = lineStart
            if requestLine == nil {
                // RFC 9112 §2.2: ignore empty lines before the request line.
                if !line.isEmpty { requestLine = try parseRequestLine(bytes, line) }
            } else if line.isEmpty {
                scanned = 0
                let head = try finish(bytes, headEnd: lf + 1)
                headLength = lf + 1
                return head
            } else {
                try parseFieldLine(bytes, line)
            }
        }
        scanned = count
        // A final CR may be the first half of the line's CRLF: it does not count.
        let pending = count - lineStart - (count > lineStart && bytes[count - 1] == ASCII.cr ? 1 : 0)
        try checkLength(of: pending, headEnd: count)
        return nil
    }

    private func checkLength(of lineLength: Int, headEnd: Int) throws(HTTPError) {
        if requestLine == nil {
            if lineLength > limits.maxRequestLine { throw .requestLineTooLong }
        } else if lineLength > limits.maxHeaderLine {
            throw .headerLineTooLong
        }
        if headEnd > limits.maxHead { throw .headTooLarge }
    }

    // MARK: Request line

    private func parseRequestLine(_ bytes: UnsafeBufferPointer<UInt8>, _ line: Range<Int>) throws(HTTPError) -> RequestLine {
        guard let firstSpace = line.first(where: { bytes[$0] == ASCII.space }),
            let secondSpace = (firstSpace + 1..<line.upperBound).first(where: { bytes[$0] == ASCII.space })
        else { throw .malformedRequestLine }
        let methodRange = line.lowerBound..<firstSpace
        let target = (firstSpace + 1)..<secondSpace
        let versionRange = (secondSpace + 1)..<line.upperBound
        guard !methodRange.isEmpty, !target.isEmpty else { throw .malformedRequestLine }
        for index in methodRange where !ASCII.isToken(bytes[index]) {
            if bytes[index] == ASCII.cr { throw .bareCarriageReturn }
            throw .invalidMethod
        }
        let version = try parseVersion(bytes, versionRange)
        let method = HTTPMethod(bytes: UnsafeBufferPointer(rebasing: bytes[methodRange]))
        let (path, query) = try parseTarget(bytes, target, method: method)
        return RequestLine(method: method, methodRange: methodRange, version: version, path: path, query: query)
    }

    private func parseVersion(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) throws(HTTPError) -> HTTPVersion {
        let prefix = Array("HTTP/1.".utf8)
        guard range.count == 8 else {
            if range.contains(where: { bytes[$0] == ASCII.cr }) { throw .bareCarriageReturn }
            throw range.contains(where: { bytes[$0] == ASCII.space }) ? .malformedRequestLine : .unsupportedVersion
        }
        for offset in 0..<7 where bytes[range.lowerBound + offset] != prefix[offset] { throw .unsupportedVersion }
        switch bytes[range.lowerBound + 7] {
        case UInt8(ascii: "1"): return .http1_1
        case UInt8(ascii: "0"): return .http1_0
        default: throw .unsupportedVersion
        }
    }

    /// Accepts origin-form (`/path?query`), absolute-form (`http://host/path`) and, for
    /// OPTIONS, asterisk-form. Returns the ranges of the path and of the query.
    private func parseTarget(_ bytes: UnsafeBufferPointer<UInt8>, _ target: Range<Int>, method: HTTPMethod?) throws(HTTPError) -> (Range<Int>, Range<Int>?) {
        var index = target.lowerBound
        while index < target.upperBound {
            let byte = bytes[index]
            guard ASCII.isTarget(byte) else {
                throw byte == ASCII.cr ? .bareCarriageReturn : .invalidTarget
            }
            if byte == UInt8(ascii: "%") {
                guard index + 2 < target.upperBound,
                    ASCII.hexValue(bytes[index + 1]) != nil, ASCII.hexValue(bytes[index + 2]) != nil
                else { throw .invalidPercentEncoding }
                index += 3
            } else {
                index += 1
            }
        }
        var pathStart = target.lowerBound
        switch bytes[pathStart] {
        case UInt8(ascii: "/"):
            break
        case UInt8(ascii: "*") where target.count == 1 && method == .OPTIONS:
            return (target, nil)
        default:
            pathStart = try absoluteFormPathStart(bytes, target)
        }
        guard let questionMark = (pathStart..<target.upperBound).first(where: { bytes[$0] == UInt8(ascii: "?") }) else {
            return (pathStart..<target.upperBound, nil)
        }
        return (pathStart..<questionMark, (questionMark + 1)..<target.upperBound)
    }

    private func absoluteFormPathStart(_ bytes: UnsafeBufferPointer<UInt8>, _ target: Range<Int>) throws(HTTPError) -> Int {
        var index = target.lowerBound
        for expected in "http".utf8 {
            guard index < target.upperBound, ASCII.lowercase(bytes[index]) == expected else { throw .invalidTarget }
            index += 1
        }
        if index < target.upperBound, ASCII.lowercase(bytes[index]) == UInt8(ascii: "s") { index += 1 }
        for expected in "://".utf8 {
            guard index < target.upperBound, bytes[index] == expected else { throw .invalidTarget }
            index += 1
        }
        let authorityStart = index
        while index < target.upperBound, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?") { index += 1 }
        guard index > authorityStart, index < target.upperBound, bytes[index] == UInt8(ascii: "/") else { throw .invalidTarget }
        return index
    }

    // MARK: Header fields

    private mutating func parseFieldLine(_ bytes: UnsafeBufferPointer<UInt8>, _ line: Range<Int>) throws(HTTPError) {
        let first = bytes[line.lowerBound]
        if first == ASCII.space || first == ASCII.tab { throw .obsoleteLineFolding }
        guard fields.count < limits.maxHeaderCount else { throw .tooManyHeaders }
        var index = line.lowerBound
        while index < line.upperBound, ASCII.isToken(bytes[index]) { index += 1 }
        guard index < line.upperBound, index > line.lowerBound, bytes[index] == ASCII.colon else {
            guard index < line.upperBound else { throw .invalidHeaderName }
            switch bytes[index] {
            case ASCII.space, ASCII.tab: throw .whitespaceBeforeColon
            case ASCII.cr: throw .bareCarriageReturn
            default: throw .invalidHeaderName
            }
        }
        let nameEnd = index
        var valueStart = index + 1
        var valueEnd = line.upperBound
        while valueStart < valueEnd, bytes[valueStart] == ASCII.space || bytes[valueStart] == ASCII.tab { valueStart += 1 }
        while valueEnd > valueStart, bytes[valueEnd - 1] == ASCII.space || bytes[valueEnd - 1] == ASCII.tab { valueEnd -= 1 }
        if let position = ASCII.firstNonFieldValue(bytes, valueStart..<valueEnd) {
            throw bytes[position] == ASCII.cr ? .bareCarriageReturn : .invalidHeaderValue
        }
        fields.append(
            HTTPHeaders.Field(
                nameStart: Int32(line.lowerBound), nameEnd: Int32(nameEnd),
                valueStart: Int32(valueStart), valueEnd: Int32(valueEnd)))
    }

    // MARK: Completing the head

    private func finish(_ bytes: UnsafeBufferPointer<UInt8>, headEnd: Int) throws(HTTPError) -> RequestHead {
        guard let line = requestLine else { throw .malformedRequestLine }
        let headers = HTTPHeaders(storage: Array(bytes[0..<headEnd]), fields: fields)
        var semantics = FieldSemantics()
        for index in fields.indices {
            try semantics.record(headers, index)
        }
        switch line.version {
        case .http1_1 where semantics.hostCount == 0: throw .missingHost
        case _ where semantics.hostCount > 1: throw .duplicateHost
        default: break
        }
        var framing = BodyFraming.none
        if let codings = semantics.transferCodings {
            guard semantics.contentLength == nil else { throw .conflictingFraming }
            guard line.version == .http1_1 else { throw .transferEncodingInHTTP10 }
            guard codings.count == 1, codings[0] == "chunked" else { throw .unsupportedTransferCoding }
            framing = .chunked
        } else if let length = semantics.contentLength {
            guard length <= limits.maxBody else { throw .contentTooLarge(limit: limits.maxBody) }
            if length > 0 { framing = .length(length) }
        }
        var expectsContinue = false
        if let expectation = semantics.expectation {
            guard expectation == "100-continue" else { throw .expectationFailed }
            expectsContinue = line.version == .http1_1 && framing != .none
        }
        let keepAlive = line.version == .http1_1 ? !semantics.connectionClose : (semantics.connectionKeepAlive && !semantics.connectionClose)
        return RequestHead(
            method: line.method,
            methodToken: line.method?.rawValue ?? String(decoding: UnsafeBufferPointer(rebasing: bytes[line.methodRange]), as: UTF8.self),
            version: line.version,
            path: String(decoding: UnsafeBufferPointer(rebasing: bytes[line.path]), as: UTF8.self),
            query: line.query.map { String(decoding: UnsafeBufferPointer(rebasing: bytes[$0]), as: UTF8.self) },
            headers: headers,
            framing: framing,
            keepAlive: keepAlive,
            expectsContinue: expectsContinue)
    }
}

/// What the framing- and connection-related fields of a head say, gathered in one pass.
private struct FieldSemantics {
    var hostCount = 0
    var contentLength: Int?
    var transferCodings: [String]?
    var connectionClose = false
    var connectionKeepAlive = false
    var expectation: String?

    mutating func record(_ headers: HTTPHeaders, _ index: Int) throws(HTTPError) {
        let field = headers.fields[index]
        switch field.nameEnd - field.nameStart {
        case 4 where headers.nameEquals(index, "host"):
            hostCount += 1
            try Self.validateHost(headers.valueBytes(at: index))
        case 14 where headers.nameEquals(index, "content-length"):
            try recordContentLength(headers.valueBytes(at: index))
        case 17 where headers.nameEquals(index, "transfer-encoding"):
            let codings = Self.listElements(headers.valueBytes(at: index))
            guard !codings.isEmpty else { throw .unsupportedTransferCoding }
            transferCodings = (transferCodings ?? []) + codings
        case 10 where headers.nameEquals(index, "connection"):
            for token in Self.listElements(headers.valueBytes(at: index)) {
                if token == "close" { connectionClose = true }
                if token == "keep-alive" { connectionKeepAlive = true }
            }
        case 6 where headers.nameEquals(index, "expect"):
            expectation = String(decoding: headers.valueBytes(at: index), as: UTF8.self).lowercased()
        default:
            break
        }
    }

    /// `Content-Length` is 1*DIGIT; a list of identical values is the same value (RFC 9110 §8.6),
    /// anything else (signs, spaces inside, hex, overflow, differing values) is refused.
    private mutating func recordContentLength(_ value: ArraySlice<UInt8>) throws(HTTPError) {
        for element in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            let trimmed = element.drop { $0 == ASCII.space || $0 == ASCII.tab }
            var digits = trimmed[...]
            while let last = digits.last, last == ASCII.space || last == ASCII.tab { digits = digits.dropLast() }
            guard !digits.isEmpty else { throw .invalidContentLength }
            var length = 0
            for byte in digits {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { throw .invalidContentLength }
                let (times10, overflow1) = length.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { throw .invalidContentLength }
                length = sum
            }
            if let existing = contentLength, existing != length { throw .invalidContentLength }
            contentLength = length
        }
    }

    private static func validateHost(_ value: ArraySlice<UInt8>) throws(HTTPError) {
        for byte in value {
            switch byte {
            case UInt8(ascii: "["), UInt8(ascii: "]"): continue
            case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "@"), UInt8(ascii: "#"): throw .invalidHost
            default: guard ASCII.isTarget(byte) else { throw .invalidHost }
            }
        }
    }

    /// Splits a comma-separated list, trimming whitespace, lowercasing, dropping empty elements.
    static func listElements(_ value: ArraySlice<UInt8>) -> [String] {
        value.split(separator: UInt8(ascii: ",")).compactMap { element in
            let text = String(decoding: element, as: UTF8.self).trimmingWhitespace().lowercased()
            return text.isEmpty ? nil : text
        }
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars = scalars.dropFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
