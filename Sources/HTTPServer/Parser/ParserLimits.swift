/// Size limits the parser enforces before buffering anything beyond them.
public struct ParserLimits: Sendable, Hashable {
    /// The longest request line, CRLF excluded; longer is answered 414.
    public var maxRequestLine = 8 * 1024
    /// The longest header (or trailer) line, CRLF excluded; longer is answered 431.
    public var maxHeaderLine = 8 * 1024
    /// The largest request head (request line and all header lines); larger is answered 431.
    public var maxHead = 32 * 1024
    /// The most header fields in one request; more is answered 431.
    public var maxHeaderCount = 100
    /// The largest request body, whether framed by `Content-Length` or chunked; larger is answered 413.
    public var maxBody = 1024 * 1024
    /// The longest chunk-size line, extensions included; longer is answered 400.
    public var maxChunkSizeLine = 1024

    /// The defaults above.
    public init() {}
}
