import CatalogModels
import CatalogStore
import Foundation
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
        guard request.query != nil else { return false }
        var found = false
        request.forEachRawQueryPair { pair in if pair.name.elementsEqual("include".utf8) { found = true } }
        return found
    }

    /// What finishing the answers to `request` from `caller` needs, decided now.
    func finishing(_ request: HTTPRequest, _ caller: Caller, maxAge: Int?, signer: PlaybackSigner? = nil) -> Finishing {
        let perCaller: Bool
        switch self {
        case .noStore: return Finishing(kind: .noStore, isRead: false, conditions: [], maxAge: nil, signer: signer, acceptEncoding: Self.acceptEncoding(request))
        case .shared: perCaller = false
        case .perCaller: perCaller = true
        case let .perCallerWhen(asks): perCaller = asks(request)
        }
        let viewer = perCaller ? (caller.userID?.rawValue ?? "") + "/" + (caller.role?.rawValue ?? "") : nil
        let isRead = request.method == .GET || request.method == .HEAD
        return Finishing(
            kind: viewer.map(Finishing.Kind.perCaller) ?? .shared, isRead: isRead,
            conditions: isRead ? request.headers.values(for: "if-none-match") : [], maxAge: maxAge, signer: signer, acceptEncoding: Self.acceptEncoding(request))
    }

    /// For a read, its `Accept-Encoding` values, read only if its answer is worth
    /// compressing (``Compression``); `nil` for a write.
    static func acceptEncoding(_ request: HTTPRequest) -> [String]? {
        guard request.method == .GET || request.method == .HEAD else { return nil }
        return request.headers.values(for: "accept-encoding")
    }

    /// The weak tag of a page: a digest of its bytes.
    static func listTag(_ body: [UInt8]) -> String {
        listTag(digest: Digest.of(body))
    }

    /// The weak tag of a page whose bytes have `digest`.
    static func listTag(digest: UInt64) -> String {
        ETag.tag(digest: digest, weak: true)
    }

    /// `tag` made the viewer's own (`viewer`: its user and the role it acts with): its
    /// version (when it has one) kept in front, so a write's `If-Match` still names it, and
    /// a digest of the tag and the viewer after it. A weak tag stays weak.
    static func viewerTag(_ original: String, _ viewer: String) -> String {
        let weak = original.hasPrefix("W/")
        let opaque = original.dropFirst(weak ? 3 : 1).dropLast()
        // A list's weak tag is a digest alone; a resource's strong tag starts with its version.
        let version = weak ? "" : opaque.prefix { $0.isASCII && $0.isNumber }
        return ETag.tag(prefix: version, digest: Digest.of(Array((opaque + "|" + viewer).utf8)), weak: weak)
    }
}

/// How one request's answers are finished (``Caching``), decided when it arrives: the
/// fields stating their caching, the tag made the viewer's own, and a `304` in place of a
/// `200` whose tag `If-None-Match` lists.
struct Finishing: Sendable {
    enum Kind: Sendable {
        case shared
        /// Per caller, for this viewer (user and role).
        case perCaller(String)
        case noStore
    }

    let kind: Kind
    /// Whether the request is a `GET` or `HEAD`.
    let isRead: Bool
    /// The request's `If-None-Match` field values (none, mostly).
    let conditions: [String]
    /// The `max-age` of shared answers, when the operator sets one.
    let maxAge: Int?
    /// What signs the media paths answers show, when playback must be signed.
    let signer: PlaybackSigner?
    /// For a read, its `Accept-Encoding` values (``Compression``); `nil` for a write, whose
    /// answer is never compressed.
    let acceptEncoding: [String]?

    /// `response`, finished (``finish(_:)``), then in gzip when it is a read's answer
    /// worth compressing and its client accepts it (``Compression``); either way an answer
    /// that could be compressed says that it varies by `Accept-Encoding`.
    /// - Throws: 400 for a malformed `If-None-Match`.
    func apply(_ response: consuming HTTPResponse) throws(APIError) -> HTTPResponse {
        guard let acceptEncoding, Compression.isEligible(response) else { return try finish(response) }
        var finished = try finish(response)
        Compression.vary(&finished)
        if Gzip.isAccepted(acceptEncoding) { Compression.gzip(&finished) }
        return finished
    }

    /// `response`, finished: its media paths signed (with signed playback; its tag then
    /// names the quarter its tokens are of), and a `Cache-Control` already set (a secret's
    /// `no-store`) kept.
    private func finish(_ response: consuming HTTPResponse) throws(APIError) -> HTTPResponse {
        if let signer, signer.required, !response.body.isEmpty {
            let now = Int(Date().timeIntervalSince1970)
            if let signed = signer.sign(response.body, now: now) {
                response.body = signed
                if let index = response.headers.firstIndex(where: { $0.name == "ETag" }), response.headers[index].value.hasSuffix("\"") {
                    response.headers[index].value = String(response.headers[index].value.dropLast()) + "-q\(signer.window(now))\""
                }
            }
        }
        guard response.cacheControl == nil else { return response }
        guard isRead, response.status == .ok else {
            response.cacheControl = "no-store"
            return response
        }
        let viewer: String?
        switch kind {
        case .noStore:
            response.cacheControl = "no-store"
            return response
        case .shared: viewer = nil
        case let .perCaller(who): viewer = who
        }
        let index = response.headers.firstIndex { $0.name == "ETag" }
        var tag = index.map { response.headers[$0].value } ?? Caching.listTag(response.body)
        if let viewer { tag = Caching.viewerTag(tag, viewer) }
        if let index { response.headers[index].value = tag } else { response.headers.append(("ETag", tag)) }
        if viewer != nil { response.headers.append(("Vary", "Authorization")) }
        let control = viewer != nil ? "private, no-cache" : maxAge.map { "max-age=\($0)" } ?? "no-cache"
        if try ETag.noneMatch(conditions, tag: tag) {
            response = HTTPResponse(status: .notModified, headers: [("ETag", tag)] + (viewer != nil ? [("Vary", "Authorization")] : []))
        }
        response.cacheControl = control
        return response
    }
}
