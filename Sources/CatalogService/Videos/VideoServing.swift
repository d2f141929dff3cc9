import CatalogMedia
import CatalogStore
import Foundation
import HTTPServer

/// `GET` and `HEAD /v1/videos/{id}/media/…`: a ready video's files for players. From
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

    func register(in routes: inout Routes) {
        // Local files open in microseconds; an object store is a network away.
        let local = storage is LocalVideoStorage
        for pattern in ["/v1/videos/{id}/media/{file}", "/v1/videos/{id}/media/{rendition}/{file}"] {
            let serve: @Sendable (HTTPRequest, Caller) throws -> HTTPResponse = { request, _ in try respond(request) }
            routes.add(.GET, pattern, .read, caching: .noStore, local ? .inline(serve) : .blocking { request, caller, _ in try serve(request, caller) })
        }
    }

    private func respond(_ request: HTTPRequest) throws -> HTTPResponse {
        let id = request.pathParameters["id"] ?? ""
        let name = [request.pathParameters["rendition"], request.pathParameters["file"]].compactMap { $0 }.joined(separator: "/")
        guard VideoUploads.isUploadID(id), VideoFiles.isValidName(name), try records.row(id)?.state == .ready else { throw Self.notFound }
        let contentType = VideoFiles.contentType(name)
        let caching = (privateReads ? "private" : "public") + ", max-age=31536000, immutable"
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
            response.cacheControl = (privateReads ? "private" : "public") + ", max-age=60"
            return response
        }
        response.headers += [("X-Content-Type-Options", "nosniff"), ("Content-Security-Policy", "default-src 'none'; sandbox")]
        if privateReads { response.headers.append(("Vary", "Authorization")) }
        response.cacheControl = response.status == .rangeNotSatisfiable ? "no-store" : caching
        return response
    }

    static let notFound = APIError(status: .notFound, code: "notFound", detail: "This video has no such file (or is not ready).")
}
