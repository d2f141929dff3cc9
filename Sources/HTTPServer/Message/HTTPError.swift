/// A failure that maps to an HTTP status: thrown by the parser, the router and handlers,
/// and rendered as an RFC 9457 `application/problem+json` response.
public struct HTTPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The response status.
    public var status: HTTPStatus
    /// A stable, machine-readable code such as `headerLineTooLong` (sent as the `code` member).
    public var code: String
    /// A human-readable explanation specific to this occurrence.
    public var detail: String
    /// Extra response headers, such as `Allow` on a 405.
    public var headers: [String: String]

    /// Creates an error.
    public init(_ status: HTTPStatus, code: String, detail: String, headers: [String: String] = [:]) {
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    /// `413 contentTooLarge (…)`.
    public var description: String { "\(status.code) \(code): \(detail)" }
}

/// Renders RFC 9457 problem documents without going through a JSON encoder.
public enum ProblemDocument {
    /// The media type of a problem document.
    public static let contentType = "application/problem+json"

    /// Renders the response for `error`, with `instance` naming the request path when known.
    public static func response(for error: HTTPError, instance: String?, extra: [(String, String)] = []) -> HTTPResponse {
        var json = "{\"type\":\"about:blank\",\"title\":"
        appendQuoted(error.status.reasonPhrase, to: &json)
        json += ",\"status\":\(error.status.code),\"detail\":"
        appendQuoted(error.detail, to: &json)
        if let instance {
            json += ",\"instance\":"
            appendQuoted(instance, to: &json)
        }
        json += ",\"code\":"
        appendQuoted(error.code, to: &json)
        for (name, value) in extra {
            json += ","
            appendQuoted(name, to: &json)
            json += ":"
            appendQuoted(value, to: &json)
        }
        json += "}"
        var headers: [(name: String, value: String)] = [("Content-Type", contentType)]
        for (name, value) in error.headers.sorted(by: { $0.key < $1.key }) {
            headers.append((name, value))
        }
        var response = HTTPResponse(status: error.status, headers: headers, body: Array(json.utf8))
        response.cacheControl = "no-store"
        return response
    }

    /// Appends `text` as a JSON string literal.
    public static func appendQuoted(_ text: String, to json: inout String) {
        json += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case "\n": json += "\\n"
            case "\r": json += "\\r"
            case "\t": json += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                json += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: json.unicodeScalars.append(scalar)
            }
        }
        json += "\""
    }
}
