import CatalogMedia
import CatalogStore
import Foundation
import HTTPServer

/// `GET` and `HEAD /v1/videos/{id}/{access}/…`: a ready video's files for players, under
/// `media` or, with signed playback, under a signature (``PlaybackSigner``). From
/// local disk by `sendfile`, with byte ranges (206, `If-Range`, 416) and validators; from
/// S3 by a redirect to a short-lived presigned URL (playlists and caption files are served
/// by the server, so the paths in them stay its own). Each file has its media type and
/// `nosniff`, and none is ever a document a browser would run. A video not ready (or
/// released) has no files here.
struct VideoServing: Sendable {
    let records: VideoRecords
    let storage: any VideoStorage
    /// Whether reads need a credential (`--require-auth-for-reads`): files are then `private`.
    let privateReads: Bool
    /// What checks signed paths (``PlaybackSigner``).
    let signer: PlaybackSigner

    func register(in routes: inout Routes) {
        // Local files open in microseconds; an object store is a network away.
        let local = storage is LocalVideoStorage
        for pattern in ["/v1/videos/{id}/{access}/{file}", "/v1/videos/{id}/{access}/{rendition}/{file}"] {
            let serve: @Sendable (HTTPRequest, Caller) throws -> HTTPResponse = { request, _ in try respond(request) }
            routes.add(.GET, pattern, .read, caching: .noStore, local ? .inline(serve) : .blocking { request, caller, _ in try serve(request, caller) })
        }
    }

    private func respond(_ request: HTTPRequest) throws -> HTTPResponse {
        let id = request.pathParameters["id"] ?? ""
        let name = [request.pathParameters["rendition"], request.pathParameters["file"]].compactMap { $0 }.joined(separator: "/")
        guard VideoUploads.isUploadID(id), VideoFiles.isValidName(name) else { throw Self.notFound }
        // `media`, or a signature (``PlaybackSigner``): what may be cached is its own for as long as it lasts.
        var caching = (privateReads ? "private" : "public") + ", max-age=31536000, immutable"
        let access = request.pathParameters["access"] ?? ""
        let now = Int(Date().timeIntervalSince1970)
        if access == "media" {
            guard !signer.required else { throw Self.unsigned }
        } else {
            guard let expires = signer.check(access, id: id, now: now) else { throw access.hasPrefix("s") ? Self.badSignature : Self.notFound }
            caching = "private, max-age=\(expires - now)"
        }
        guard try records.row(id)?.state == .ready else { throw Self.notFound }
        let contentType = VideoFiles.contentType(name)
        var response: HTTPResponse
        switch try storage.locate(id, name) {
        case .missing:
            throw Self.notFound
        case let .file(path):
            guard let file = try ResponseFile.open(path) else { throw Self.notFound }
            // Of this very file: a job run again writes new files under the same names.
            let etag = "\"" + String(file.size, radix: 36) + "-" + String(file.modified, radix: 36) + "-" + String(file.identity, radix: 36) + "\""
            response = .serving(file, for: request, contentType: contentType, etag: etag)
        case let .bytes(bytes):
            let etag = ETag.tag(digest: Digest.of(bytes), weak: false)
            if let match = request.headers["if-none-match"], EntityTags.weaklyMatches(match, etag) {
                response = HTTPResponse(status: .notModified, headers: [("ETag", etag)])
            } else {
                response = HTTPResponse(status: .ok, headers: [("Content-Type", contentType), ("ETag", etag)], body: bytes)
            }
        case let .redirect(url):
            response = HTTPResponse(status: .found, headers: [("Location", url)])
            // The presigned URL lasts minutes: the redirect may be kept for one.
            response.cacheControl = (privateReads || access != "media" ? "private" : "public") + ", max-age=60"
            return response
        }
        response.headers += [("X-Content-Type-Options", "nosniff"), ("Content-Security-Policy", "default-src 'none'; sandbox")]
        if privateReads { response.headers.append(("Vary", "Authorization")) }
        response.cacheControl = response.status == .rangeNotSatisfiable ? "no-store" : caching
        return response
    }

    static let notFound = APIError(status: .notFound, code: "notFound", detail: "This video has no such file (or is not ready).")
    static let unsigned = APIError(
        status: .forbidden, code: "signedPlaybackRequired", detail: "This server serves video only under a signed path: use the paths documents show.")
    static let badSignature = APIError(
        status: .forbidden, code: "invalidPlaybackSignature", detail: "The path's signature is not valid (expired, or not this video's): fetch the document again.")
}
