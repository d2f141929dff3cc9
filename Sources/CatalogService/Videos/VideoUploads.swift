import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer
import Logging
import Synchronization

/// The routes of resumable video uploads (``UploadDialect``: tus 1.0.0, the IETF draft,
/// or a plain body):
/// - `POST /v1/playable-items/{id}/video` creates an upload for the item (editors and
///   admins; the expensive budget), with its first bytes when the body has some;
/// - `HEAD /v1/uploads/{uploadId}` tells its durable offset;
/// - `PATCH /v1/uploads/{uploadId}` appends at that offset;
/// - `DELETE /v1/uploads/{uploadId}` cancels it.
///
/// An upload is its uploader's (and admins'): anyone else gets 404. A request appending
/// holds the upload (a lease in the database, renewed while its body arrives), so two
/// never append at once (423). The body goes to the storage as it arrives, with bounded
/// memory; once it ended, the bytes are synced (or sent to the object store) and only
/// then is the new offset recorded and reported, so the offset the server reports is
/// always kept. A body cut off is kept as far as it came (tus asks it), unless it carried
/// a checksum, which then cannot be checked. A whole upload queues its processing job.
final class VideoUploads: Sendable {
    let records: VideoRecords
    let storage: any VideoStorage
    let settings: VideoSettings
    let leases: UploadLeases
    /// Tells the processing workers a job waits.
    let jobQueued: @Sendable () -> Void

    init(records: VideoRecords, storage: any VideoStorage, settings: VideoSettings, leases: UploadLeases, jobQueued: @escaping @Sendable () -> Void) {
        self.records = records
        self.storage = storage
        self.settings = settings
        self.leases = leases
        self.jobQueued = jobQueued
    }

    static let uploadsPath = "/v1/uploads/"
    static let logger = Logger(label: "catalog.videos")

    /// What `OPTIONS` tells of the upload routes (tus discovery).
    private var discovery: [(name: String, value: String)] {
        [
            ("Tus-Resumable", UploadDialect.tusVersion), ("Tus-Version", UploadDialect.tusVersion), ("Tus-Extension", UploadDialect.tusExtensions),
            ("Tus-Max-Size", String(settings.maxBytes)), ("Tus-Checksum-Algorithm", UploadChecksum.algorithms),
        ]
    }

    func register(in routes: inout Routes) {
        routes.add(
            .POST, "/v1/playable-items/{id}/video", .editor, rate: .expensive, maxBody: settings.maxBytes, bodyPassesServerLimit: true, caching: .noStore,
            // A key's fingerprint is its body's, which a streamed body does not have here.
            replaysAnswers: false, options: discovery, .receiving { [self] request, caller, responder, done in try create(request, caller, responder, done) })
        routes.add(
            .HEAD, Self.uploadsPath + "{uploadId}", .editor, caching: .noStore, options: discovery,
            .later { [self] request, caller, _, done in try offset(request, caller, done) })
        routes.add(
            .PATCH, Self.uploadsPath + "{uploadId}", .editor, maxBody: settings.maxBytes, bodyPassesServerLimit: true, caching: .noStore,
            options: discovery, .receiving { [self] request, caller, responder, done in try append(request, caller, responder, done) })
        routes.add(
            .DELETE, Self.uploadsPath + "{uploadId}", .editor, caching: .noStore, options: discovery,
            .later { [self] request, caller, _, done in try cancel(request, caller, done) })
    }

    // MARK: Creation

    private func create(_ request: HTTPRequest, _ caller: Caller, _ responder: Responder, _ done: @escaping Completion) throws {
        // Malformed fields are a 400 before any protocol version is looked at.
        let item = try ResourceEndpoints.id(request)
        let metadata = try UploadMetadata.read(request)
        _ = try UploadDialect.integer(request, "upload-length")
        let dialect = try UploadDialect(request)
        do {
            guard let user = caller.userID else { throw APIError.unauthenticated }
            let completes = try dialect.completes(request)
            let bodyLength = try UploadDialect.integer(request, "content-length")
            let hasBody = (bodyLength ?? 0) > 0 || request.headers["transfer-encoding"] != nil
            let length: Int
            if let declared = try UploadDialect.integer(request, "upload-length") {
                length = declared
            } else if dialect == .tus {
                if request.headers["upload-defer-length"] != nil {
                    throw APIError(status: .badRequest, code: "lengthRequired", detail: "This server needs Upload-Length when an upload is created.")
                }
                throw APIError(status: .badRequest, code: "lengthRequired", detail: "Upload-Length is required.")
            } else if completes != false, let bodyLength {
                length = bodyLength
            } else {
                throw APIError(status: .badRequest, code: "lengthRequired", detail: "Send Upload-Length, or the whole video with its Content-Length.")
            }
            if completes == true, let bodyLength, bodyLength != length {
                throw APIError(
                    status: .badRequest, code: "inconsistentUploadLength", detail: "A complete upload's body is its Upload-Length (\(length) bytes), not \(bodyLength).")
            }
            guard length <= settings.maxBytes else {
                throw APIError(status: .contentTooLarge, code: "uploadTooLarge", detail: "A video may have at most \(settings.maxBytes) bytes.")
            }
            if dialect == .tus, hasBody, request.headers["content-type"] != "application/offset+octet-stream" {
                throw APIError(
                    status: .unsupportedMediaType, code: "unsupportedMediaType",
                    detail: "The bytes of an upload are sent as application/offset+octet-stream.")
            }
            let checksum = try UploadChecksum(request)
            let id = Crypto.hex(try Crypto.randomBytes(16))
            let expires = Timestamp.milliseconds(Date()) + Int64(VideoRules.uploadLifetime * 1000)
            let queued = Handler.runBlocking { [self] in
                do {
                    let storeUpload = try storage.beginUpload(id)
                    records.create(
                        id: id, item: item, user: user, length: length, metadata: metadata, quota: settings.quotaBytes, expiry: expires,
                        storeUpload: storeUpload
                    ) { [self] result in
                        switch result {
                        case let .failure(error):
                            _ = Handler.runBlocking { [storage] in try? storage.abortUpload(UploadProgress(id: id, length: length, storeUpload: storeUpload)) }
                            done(.failure(Self.refusal(error, dialect)))
                        case let .success((row, _)):
                            let location = Self.uploadsPath + id
                            let answer: @Sendable (VideoRow) -> HTTPResponse = { [settings] row in
                                var response = HTTPResponse(
                                    status: .created, headers: [("Location", location)] + dialect.state(row, maxBytes: settings.maxBytes))
                                response.cacheControl = "no-store"
                                return response
                            }
                            guard hasBody || row.progress.length == 0 else { return done(.success(answer(row))) }
                            if case let .draft(version) = dialect {
                                // The draft's client learns it may resume before it sends the body.
                                responder.inform(
                                    HTTPStatus(code: 104),
                                    headers: [
                                        ("Location", location), ("Upload-Draft-Interop-Version", String(version)), ("Upload-Limit", "max-size=\(settings.maxBytes)"),
                                    ])
                            }
                            take(row, offset: 0, caller: caller, dialect: dialect, checksum: checksum, completes: completes, responder: responder, answer: answer, done)
                        }
                    }
                } catch {
                    done(.failure(Self.refusal(error, dialect)))
                }
            }
            if !queued { throw WorkPool.busy }
        } catch {
            throw Self.refusal(error, dialect)
        }
    }

    // MARK: Offset, append, cancel

    /// The upload the path names, if it is the caller's (or the caller is an admin).
    private func upload(_ request: HTTPRequest, _ caller: Caller) throws -> VideoRow {
        let id = request.pathParameters["uploadId"] ?? ""
        guard Self.isUploadID(id), let row = try records.row(id), caller.has(.admin) || row.uploader == caller.userID else {
            throw UploadRefusal.notFound
        }
        return row
    }

    /// Whether `text` is an upload's id: 32 lowercase hex digits.
    static func isUploadID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    private func offset(_ request: HTTPRequest, _ caller: Caller, _ done: @escaping Completion) throws {
        let dialect = try UploadDialect(request)
        do {
            try report(try upload(request, caller), dialect: dialect, attempt: 0, done)
        } catch {
            throw Self.refusal(error, dialect)
        }
    }

    /// Answers with `row`'s offset once no request appends to it (waiting for one that
    /// does, up to ``waitsForHolder`` tenths of a second: its bytes then count).
    private func report(_ row: VideoRow, dialect: UploadDialect, attempt: Int, _ done: @escaping Completion) throws {
        let now = Timestamp.milliseconds(Date())
        if row.state == .uploading, row.lockedBy != nil, (row.lockedUntil ?? 0) > now, attempt < Self.waitsForHolder {
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in
                let queued = Handler.runBlocking { [self] in
                    do {
                        guard let again = try records.row(row.id) else { throw UploadRefusal.notFound }
                        try report(again, dialect: dialect, attempt: attempt + 1, done)
                    } catch {
                        done(.failure(Self.refusal(error, dialect)))
                    }
                }
                if !queued { done(.failure(WorkPool.busy)) }
            }
            return
        }
        if row.state == .released || (row.state == .uploading && (row.expires ?? .max) <= now) { throw UploadRefusal.gone }
        var response = HTTPResponse(status: dialect == .tus ? .ok : .noContent, headers: dialect.state(row, maxBytes: settings.maxBytes))
        response.cacheControl = "no-store"
        done(.success(response))
    }

    private func append(_ request: HTTPRequest, _ caller: Caller, _ responder: Responder, _ done: @escaping Completion) throws {
        guard let offset = try UploadDialect.integer(request, "upload-offset") else { throw APIError.invalidHeader("Upload-Offset", "It is required.") }
        let dialect = try UploadDialect(request)
        do {
            let contentType = request.headers["content-type"]
            switch dialect {
            case .tus where contentType != "application/offset+octet-stream":
                throw APIError(
                    status: .unsupportedMediaType, code: "unsupportedMediaType", detail: "A tus append is sent as application/offset+octet-stream.")
            case let .draft(version) where version >= 6 && contentType != "application/partial-upload":
                throw APIError(
                    status: .unsupportedMediaType, code: "unsupportedMediaType", detail: "An append is sent as application/partial-upload.")
            default:
                break
            }
            let checksum = try UploadChecksum(request)
            let completes = try dialect.completes(request)
            let row = try upload(request, caller)
            // (Both are the client's, up to 19 digits: compared without adding them.)
            guard offset <= row.progress.length else { throw UploadRefusal.offsetMismatch(current: row.progress.offset) }
            if let bodyLength = try UploadDialect.integer(request, "content-length") {
                guard bodyLength <= row.progress.length - offset else {
                    throw APIError(status: .contentTooLarge, code: "uploadTooLarge", detail: "The append passes the upload's length (\(row.progress.length) bytes).")
                }
                if completes == true, offset + bodyLength != row.progress.length {
                    throw APIError(status: .badRequest, code: "inconsistentUploadLength", detail: "The upload has \(row.progress.length) bytes, not \(offset + bodyLength).")
                }
            }
            let answer: @Sendable (VideoRow) -> HTTPResponse = { [settings] row in
                var response = HTTPResponse(status: .noContent, headers: dialect.state(row, maxBytes: settings.maxBytes))
                response.cacheControl = "no-store"
                return response
            }
            take(row, offset: offset, caller: caller, dialect: dialect, checksum: checksum, completes: completes, responder: responder, answer: answer, done)
        } catch {
            throw Self.refusal(error, dialect)
        }
    }

    private func cancel(_ request: HTTPRequest, _ caller: Caller, _ done: @escaping Completion) throws {
        let dialect = try UploadDialect(request)
        do {
            let row = try upload(request, caller)
            records.cancel(row.id) { [storage] result in
                switch result {
                case let .success(cancelled):
                    // The bytes go now; what is left (a store that failed) goes with the sweep.
                    _ = Handler.runBlocking { try? storage.abortUpload(cancelled.progress) }
                    var response = HTTPResponse(status: .noContent, headers: dialect.fields)
                    response.cacheControl = "no-store"
                    done(.success(response))
                case let .failure(error):
                    done(.failure(Self.refusal(error, dialect)))
                }
            }
        } catch {
            throw Self.refusal(error, dialect)
        }
    }
}
