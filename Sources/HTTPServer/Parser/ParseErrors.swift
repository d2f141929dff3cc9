/// The errors the request parser reports. Each is a value with a stable `code`.
extension HTTPError {
    static func badRequest(_ code: String, _ detail: String) -> HTTPError {
        HTTPError(.badRequest, code: code, detail: detail)
    }

    static let requestLineTooLong = HTTPError(.uriTooLong, code: "requestLineTooLong", detail: "The request line exceeds the server's limit.")
    static let headerLineTooLong = HTTPError(.requestHeaderFieldsTooLarge, code: "headerLineTooLong", detail: "A header line exceeds the server's limit.")
    static let headTooLarge = HTTPError(.requestHeaderFieldsTooLarge, code: "headTooLarge", detail: "The request head exceeds the server's limit.")
    static let tooManyHeaders = HTTPError(.requestHeaderFieldsTooLarge, code: "tooManyHeaders", detail: "The request has more header fields than the server accepts.")
    static func contentTooLarge(limit: Int) -> HTTPError {
        HTTPError(.contentTooLarge, code: "contentTooLarge", detail: "The request body exceeds the limit of \(limit) bytes.")
    }
    static let bareLineFeed = badRequest("invalidLineEnding", "Lines must end with CRLF.")
    static let bareCarriageReturn = badRequest("invalidLineEnding", "A carriage return appears outside a CRLF line ending.")
    static let obsoleteLineFolding = badRequest("obsoleteLineFolding", "Header lines must not start with whitespace (obsolete line folding).")
    static let whitespaceBeforeColon = badRequest("whitespaceBeforeColon", "A header field name is followed by whitespace before the colon.")
    static let invalidHeaderName = badRequest("invalidHeaderName", "A header field name contains characters that are not allowed.")
    static let invalidHeaderValue = badRequest("invalidHeaderValue", "A header field value contains control characters.")
    static let malformedRequestLine = badRequest("malformedRequestLine", "The request line must be: method, one space, target, one space, HTTP version.")
    static let invalidMethod = badRequest("invalidMethod", "The method is not a valid token.")
    static let unsupportedVersion = badRequest("unsupportedVersion", "Only HTTP/1.1 and HTTP/1.0 are supported.")
    static let invalidTarget = badRequest("invalidTarget", "The request target contains characters that are not allowed or is not in origin or absolute form.")
    static let invalidPercentEncoding = badRequest("invalidPercentEncoding", "The request target contains an invalid percent-encoding.")
    static let missingHost = badRequest("missingHost", "HTTP/1.1 requests must carry exactly one Host header.")
    static let duplicateHost = badRequest("duplicateHost", "The request carries more than one Host header.")
    static let invalidHost = badRequest("invalidHost", "The Host header is not a valid host and port.")
    static let invalidContentLength = badRequest("invalidContentLength", "Content-Length must be a single non-negative decimal number.")
    static let conflictingFraming = badRequest("conflictingFraming", "A request must not carry both Content-Length and Transfer-Encoding.")
    static let transferEncodingInHTTP10 = badRequest("conflictingFraming", "Transfer-Encoding is not allowed in an HTTP/1.0 request.")
    static let unsupportedTransferCoding = HTTPError(.notImplemented, code: "unsupportedTransferCoding", detail: "The only supported transfer coding is a single final 'chunked'.")
    static let methodNotImplemented = HTTPError(.notImplemented, code: "methodNotImplemented", detail: "The server does not implement this method.")
    static let expectationFailed = HTTPError(.expectationFailed, code: "expectationFailed", detail: "The only supported expectation is 100-continue.")
    static let invalidChunk = badRequest("invalidChunk", "The chunked body is malformed.")
    static let chunkSizeLineTooLong = badRequest("invalidChunk", "A chunk-size line exceeds the server's limit.")
    static let plainHTTPOnTLSPort = badRequest("plainHTTPOnTLSPort", "This port speaks HTTPS only: send the request over TLS (https://).")
    static let headTimeout = HTTPError(.requestTimeout, code: "requestTimeout", detail: "The request head was not received in time.")
    static let bodyTimeout = HTTPError(.requestTimeout, code: "requestTimeout", detail: "The request body was not received in time.")
    static let bodyBufferFull = HTTPError(
        .serviceUnavailable, code: "serverBusy", detail: "The server holds too many request bodies; retry shortly.",
        headers: ["Retry-After": "1"])
    static let tooManyFromAddress = HTTPError(
        .serviceUnavailable, code: "tooManyConnections", detail: "Too many connections from this address.",
        headers: ["Retry-After": "1"])
    static let requestExpired = HTTPError(
        .serviceUnavailable, code: "requestTimeout", detail: "The request was not answered in time.",
        headers: ["Retry-After": "1"])
}
