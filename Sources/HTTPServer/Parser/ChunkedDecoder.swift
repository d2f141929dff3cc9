/// An incremental decoder for the `chunked` transfer coding (RFC 9112 §7.1).
///
/// It appends decoded data to a body array, checks the running total against the body
/// limit as soon as each chunk size is known (before the data arrives), bounds the
/// chunk-size line and the trailer section, and ignores trailer fields.
struct ChunkedDecoder {
    private enum State {
        case size(value: Int, digits: Int, lineLength: Int)
        case sizeWhitespace(value: Int, lineLength: Int)
        case sizeExtension(value: Int, lineLength: Int)
        case sizeLineFeed(value: Int)
        case data(remaining: Int)
        case dataCarriageReturn
        case dataLineFeed
        case trailerLine(length: Int, sawColon: Bool)
        case trailerLineFeed(length: Int, sawColon: Bool)
        case done
    }

    let limits: ParserLimits
    private var state = State.size(value: 0, digits: 0, lineLength: 0)
    private var trailerCount = 0

    init(limits: ParserLimits) {
        self.limits = limits
    }

    /// Decodes as much of `bytes` as belongs to this body.
    /// - Returns: how many bytes were consumed and whether the body is complete.
    mutating func decode(_ bytes: UnsafeBufferPointer<UInt8>, into body: inout [UInt8]) throws(HTTPError) -> (consumed: Int, done: Bool) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch state {
            case .done:
                return (index, true)
            case let .data(remaining):
                let take = min(remaining, bytes.count - index)
                body.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[index..<(index + take)]))
                index += take
                state = take == remaining ? .dataCarriageReturn : .data(remaining: remaining - take)
                continue
            case let .size(value, digits, lineLength):
                guard lineLength < limits.maxChunkSizeLine else { throw .chunkSizeLineTooLong }
                if let digit = ASCII.hexValue(byte) {
                    guard digits < 15 else { throw .invalidChunk }
                    state = .size(value: value << 4 | Int(digit), digits: digits + 1, lineLength: lineLength + 1)
                } else {
                    guard digits > 0 else { throw .invalidChunk }
                    switch byte {
                    case ASCII.cr: state = .sizeLineFeed(value: value)
                    case UInt8(ascii: ";"): state = .sizeExtension(value: value, lineLength: lineLength + 1)
                    case ASCII.space, ASCII.tab: state = .sizeWhitespace(value: value, lineLength: lineLength + 1)
                    default: throw .invalidChunk
                    }
                }
            case let .sizeWhitespace(value, lineLength):
                // BWS is allowed only before a chunk extension.
                guard lineLength < limits.maxChunkSizeLine else { throw .chunkSizeLineTooLong }
                switch byte {
                case ASCII.space, ASCII.tab: state = .sizeWhitespace(value: value, lineLength: lineLength + 1)
                case UInt8(ascii: ";"): state = .sizeExtension(value: value, lineLength: lineLength + 1)
                default: throw .invalidChunk
                }
            case let .sizeExtension(value, lineLength):
                guard lineLength < limits.maxChunkSizeLine else { throw .chunkSizeLineTooLong }
                if byte == ASCII.cr {
                    state = .sizeLineFeed(value: value)
                } else {
                    guard ASCII.isFieldValue(byte) else { throw .invalidChunk }
                    state = .sizeExtension(value: value, lineLength: lineLength + 1)
                }
            case let .sizeLineFeed(value):
                guard byte == ASCII.lf else { throw .invalidChunk }
                if value == 0 {
                    state = .trailerLine(length: 0, sawColon: false)
                } else {
                    guard body.count + value <= limits.maxBody else { throw .contentTooLarge(limit: limits.maxBody) }
                    state = .data(remaining: value)
                }
            case .dataCarriageReturn:
                guard byte == ASCII.cr else { throw .invalidChunk }
                state = .dataLineFeed
            case .dataLineFeed:
                guard byte == ASCII.lf else { throw .invalidChunk }
                state = .size(value: 0, digits: 0, lineLength: 0)
            case let .trailerLine(length, sawColon):
                if byte == ASCII.cr {
                    state = .trailerLineFeed(length: length, sawColon: sawColon)
                } else {
                    if length == 0 && (byte == ASCII.space || byte == ASCII.tab) { throw .obsoleteLineFolding }
                    guard ASCII.isFieldValue(byte) else { throw byte == ASCII.lf ? .bareLineFeed : .invalidHeaderValue }
                    guard length < limits.maxHeaderLine else { throw .headerLineTooLong }
                    state = .trailerLine(length: length + 1, sawColon: sawColon || byte == ASCII.colon)
                }
            case let .trailerLineFeed(length, sawColon):
                guard byte == ASCII.lf else { throw .bareCarriageReturn }
                if length == 0 {
                    state = .done
                    return (index + 1, true)
                }
                guard sawColon else { throw .invalidChunk }
                trailerCount += 1
                guard trailerCount <= limits.maxHeaderCount else { throw .tooManyHeaders }
                state = .trailerLine(length: 0, sawColon: false)
            }
            index += 1
        }
        if case .done = state { return (index, true) }
        return (index, false)
    }
}
