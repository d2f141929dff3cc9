import CatalogModels
import HTTPServer

/// How a route's answers may be stored by caches (RFC 9111): stated on every answer, and
/// with an entity tag on every `200` to a `GET`, so clients revalidate cheaply and a
/// cache shared by several users (a browser profile, a `URLCache`, a proxy) can never
/// show one user what another was shown.
enum Caching: Sendable {
    /// The same for every caller (the public catalog): `no-cache`, or the operator's
    /// `max-age` (`--public-max-age`). Lists are tagged `W/"<digest of the page>"`.
    case shared
    /// Depends on the caller (a profile, keys, what a private playlist shows its owner):
    /// `private, no-cache` and `Vary: Authorization`, with a tag that differs between
    /// viewers (`"<version>-<digest>"`, or `W/"<digest>"` for a list).
    case perCaller
    /// Per caller when the request asks for what depends on it (an `include`), else shared.
    case perCallerWhen(@Sendable (HTTPRequest) -> Bool)
    /// Never stored: health, readiness, metrics, the change feed, secrets, writes.
    case noStore

    /// What a route of `access` answering `method` states when its registration says nothing.
    static func `default`(_ method: HTTPMethod, _ access: Access) -> Caching {
        guard method == .GET else { return .noStore }
        switch access {
        case .open: return .noStore
        case .read: return .shared
        case .member, .editor, .admin: return .perCaller
        }
    }

    /// A request that asks for anything embedded (`include=…`).
    static let includes: @Sendable (HTTPRequest) -> Bool = { request in
        var found = false
        request.forEachRawQueryPair { pair in if pair.name.elementsEqual("include".utf8) { found = true } }
        return found
    }

    /// `response` to `request` from `caller`, stating its caching: fields added (a
    /// `Cache-Control` already set, such as a secret's `no-store`, is kept), its tag made
    /// per viewer or given to a list, and turned into a `304` when `If-None-Match` lists
    /// that tag. `maxAge` is the shared answers' `max-age`, when the operator sets one.
    /// - Throws: 400 for a malformed `If-None-Match`.
    func finish(_ response: HTTPResponse, _ request: HTTPRequest, _ caller: Caller, maxAge: Int?) throws(APIError) -> HTTPResponse {
        var response = response
        let stated = response.headers.contains { $0.name == "Cache-Control" }
        guard request.method == .GET || request.method == .HEAD, response.status == .ok, !stated else {
            if !stated { response.headers.append(("Cache-Control", "no-store")) }
            return response
        }
        let perCaller: Bool
        switch self {
        case .noStore:
            response.headers.append(("Cache-Control", "no-store"))
            return response
        case .shared: perCaller = false
        case .perCaller: perCaller = true
        case let .perCallerWhen(asks): perCaller = asks(request)
        }
        let index = response.headers.firstIndex { $0.name == "ETag" }
        var tag = index.map { response.headers[$0].value } ?? Self.listTag(response.body)
        if perCaller { tag = Self.viewerTag(tag, caller) }
        if let index { response.headers[index].value = tag } else { response.headers.append(("ETag", tag)) }
        var fields: [(name: String, value: String)] = perCaller
            ? [("Cache-Control", "private, no-cache"), ("Vary", "Authorization")]
            : [("Cache-Control", maxAge.map { "max-age=\($0)" } ?? "no-cache")]
        guard try ETag.noneMatch(request, tag: tag) else {
            response.headers += fields
            return response
        }
        fields.insert(("ETag", tag), at: 0)
        return HTTPResponse(status: .notModified, headers: fields)
    }

    /// The weak tag of a page: a digest of its bytes.
    private static func listTag(_ body: [UInt8]) -> String {
        "W/\"" + hex(Digest.of(body)) + "\""
    }

    /// `tag` made the viewer's own: its version (when it has one) kept in front, so a
    /// write's `If-Match` still names it, and a digest of the tag and the viewer (its
    /// user and the role it acts with) after it. A weak tag stays weak.
    private static func viewerTag(_ tag: String, _ caller: Caller) -> String {
        let weak = tag.hasPrefix("W/")
        let opaque = tag.dropFirst(weak ? 3 : 1).dropLast()
        // A list's weak tag is a digest alone; a resource's strong tag starts with its version.
        let version = weak ? "" : opaque.prefix { $0.isASCII && $0.isNumber }
        let viewer = (caller.userID?.rawValue ?? "") + "/" + (caller.role?.rawValue ?? "")
        let digest = hex(Digest.of(Array((opaque + "|" + viewer).utf8)))
        let text = version.isEmpty ? digest : version + "-" + digest
        return (weak ? "W/\"" : "\"") + text + "\""
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
