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
    private static let logger = Logger(label: "catalog.videos")

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

    // MARK: Appending

    /// How many times (a tenth of a second apart) a request waits for another one appending
    /// to the same upload to end, before it is refused with 423.
    static let waitsForHolder = 30

    /// Takes `row` for this request at `offset`, opens its append, and takes the body
    /// into it; once the body ended, keeps it (or drops it) and answers with `answer`.
    /// While an older request holds it, this one ends that request (when it is this
    /// server's and its body still arrives) and waits for it to let go.
    private func take(
        _ row: VideoRow, offset: Int, caller: Caller, dialect: UploadDialect, checksum: UploadChecksum?, completes: Bool?, responder: Responder,
        answer: @escaping @Sendable (VideoRow) -> HTTPResponse, attempt: Int = 0, holder given: String? = nil, _ done: @escaping Completion
    ) {
        // One holder through every attempt: it supersedes only the requests before it.
        let holder = given ?? leases.newHolder()
        records.take(row.id, for: holder, until: leases.until(), offset: offset) { [self] result in
            if case .failure(UploadRefusal.locked) = result, attempt < Self.waitsForHolder {
                // A request before this one (cut off on the client's side, not yet on ours)
                // still appends: it ends first, keeping what it has, then this one goes on.
                leases.supersede(row.id, by: holder)
                return DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in
                    take(
                        row, offset: offset, caller: caller, dialect: dialect, checksum: checksum, completes: completes, responder: responder, answer: answer,
                        attempt: attempt + 1, holder: holder, done)
                }
            }
            guard case let .success(taken) = result else {
                if case let .failure(error) = result { done(.failure(Self.refusal(error, dialect, current: row))) }
                return
            }
            let queued = Handler.runBlocking { [self] in
                let append: UploadAppend
                do {
                    append = try storage.openAppend(taken.progress)
                } catch {
                    records.letGo(taken.id, holder: holder)
                    return done(.failure(Self.storageFailure(error, dialect)))
                }
                leases.hold(taken.id, as: holder, responder: responder)
                let sink = UploadSink(
                    append: append, allowed: taken.progress.length - taken.progress.offset, checksum: checksum, storage: storage, responder: responder
                ) { [self] sink, ending in
                    ended(sink, ending, holder: holder, dialect: dialect, checksum: checksum, completes: completes, answer: answer, done)
                }
                responder.receiveBody(into: sink)
            }
            if !queued {
                records.letGo(taken.id, holder: holder)
                done(.failure(WorkPool.busy))
            }
        }
    }

    /// The body ended: what arrived is kept (synced, recorded) or dropped, and the request answered.
    private func ended(
        _ sink: UploadSink, _ ending: UploadSink.Ending, holder: String, dialect: UploadDialect, checksum: UploadChecksum?, completes: Bool?,
        answer: @escaping @Sendable (VideoRow) -> HTTPResponse, _ done: @escaping Completion
    ) {
        let append = sink.append, before = append.upload
        let refusal: APIError?
        switch ending {
        case .unqueued:
            refusal = APIError(status: .serviceUnavailable, code: "serverBusy", detail: "The server is busy; send the bytes again shortly.", headers: [("Retry-After", "1")])
        case .cut:
            // A checksum cannot be checked against part of a body: nothing of it is kept.
            if let failure = sink.failure {
                refusal = Self.storageFailure(failure, dialect)
            } else {
                refusal = checksum == nil ? nil : APIError(status: .badRequest, code: "incompleteBody", detail: "The body ended early.")
            }
        case .complete:
            if sink.overflowed {
                refusal = APIError(status: .contentTooLarge, code: "uploadTooLarge", detail: "The append passes the upload's length (\(before.length) bytes).")
            } else if let failure = sink.failure {
                refusal =
                    append.failed
                    ? APIError(status: HTTPStatus(code: 507), code: "insufficientStorage", detail: "The server could not keep the bytes; send them again later.")
                    : Self.storageFailure(failure, dialect)
            } else if let checksum, let digest = sink.digest, !Crypto.constantTimeEqual(digest.finish(), checksum.expected) {
                refusal = APIError(status: HTTPStatus(code: 460), code: "checksumMismatch", detail: "The body's \(checksum.algorithm.rawValue) is not the Upload-Checksum.")
            } else if completes == true, before.offset + append.received != before.length {
                refusal = APIError(
                    status: .badRequest, code: "inconsistentUploadLength", detail: "The upload has \(before.length) bytes, not \(before.offset + append.received).")
            } else {
                refusal = nil
            }
        }
        if let refusal {
            leases.release(before.id, holder: holder)
            records.letGo(before.id, holder: holder)
            return done(.failure(refusal.adding(dialect.fields)))
        }
        let committed: UploadProgress
        do {
            committed = try storage.commit(append)
        } catch {
            leases.release(before.id, holder: holder)
            records.letGo(before.id, holder: holder)
            return done(.failure(Self.storageFailure(error, dialect)))
        }
        records.commit(committed, replacing: before, holder: holder) { [self] result in
            leases.release(before.id, holder: holder)
            switch result {
            case let .success(row):
                _ = Handler.runBlocking { [storage] in storage.superseded(before, by: committed) }
                if row.state == .queued { jobQueued() }
                done(.success(answer(row)))
            case let .failure(error):
                done(.failure(Self.refusal(error, dialect)))
            }
        }
    }

    // MARK: Errors

    /// `error` as the dialect answers it, with its fields.
    static func refusal(_ error: any Error, _ dialect: UploadDialect, current: VideoRow? = nil) -> any Error {
        let api: APIError
        switch error {
        case let error as UploadRefusal:
            switch error {
            case .notFound:
                api = APIError(status: .notFound, code: "notFound", detail: "No upload of yours is at this address.")
            case .gone:
                api = APIError(status: dialect == .tus ? .gone : .notFound, code: "uploadGone", detail: "The upload expired or was cancelled; start a new one.")
            case .locked:
                api = APIError(
                    status: HTTPStatus(code: 423), code: "uploadLocked", detail: "Another request is sending bytes of this upload; try again once it ends.",
                    headers: [("Retry-After", "5")])
            case let .offsetMismatch(offset):
                api = APIError(
                    status: .conflict, code: "mismatchingUploadOffset", detail: "The upload is at offset \(offset); send from there.",
                    headers: [("Upload-Offset", String(offset))] + dialect.completeness(false))
            case .complete:
                api = APIError(
                    status: .conflict, code: "completedUpload", detail: "The upload is complete.",
                    headers: (current.map { [("Upload-Offset", String($0.progress.length))] } ?? []) + dialect.completeness(true))
            }
        case let error as APIError:
            api = error
        default:
            return ErrorWithHeaders(error: error, headers: dialect.fields)
        }
        return api.adding(dialect.fields)
    }

    /// A storage failure, as a 503 (the client sends again).
    static func storageFailure(_ error: any Error, _ dialect: UploadDialect) -> APIError {
        logger.error("Video storage failed: \(error)")
        return APIError(status: .serviceUnavailable, code: "storageUnavailable", detail: "The video storage failed; send the bytes again shortly.", headers: dialect.fields)
    }
}

extension APIError {
    /// The error with `fields` added to its headers (those it has already are kept).
    func adding(_ fields: [(name: String, value: String)]) -> APIError {
        var error = self
        for field in fields where !error.headers.contains(where: { $0.name.lowercased() == field.name.lowercased() }) { error.headers.append(field) }
        return error
    }
}

/// The limits of hosted video.
struct VideoSettings: Sendable {
    /// The largest upload.
    var maxBytes = VideoRules.defaultMaxBytes
    /// The most bytes one user's unfinished uploads may still need.
    var quotaBytes = VideoRules.defaultQuotaBytes
}

/// Who holds uploads in this process: each appending request is a holder of its own
/// (this server's id and a number), whose lease in the database is renewed while its
/// body arrives (``renewing(_:)``), so a long body never loses its upload to another
/// request, and a server that dies lets go within ``lease``.
final class UploadLeases: Sendable {
    /// How long a lease lasts without renewal.
    static let lease: Int64 = 120_000
    /// This server's part of every holder's name.
    let server: String
    private let next = Atomic<UInt64>(0)
    /// The uploads held now, by id, with their holder and its request.
    private let held = Mutex<[String: (holder: String, responder: Responder)]>([:])

    init(server: String) {
        self.server = server
    }

    func newHolder() -> String {
        server + "/" + String(next.add(1, ordering: .relaxed).newValue)
    }

    /// When a lease taken now ends.
    func until() -> Int64 {
        Timestamp.milliseconds(Date()) + Self.lease
    }

    func hold(_ id: String, as holder: String, responder: Responder) {
        held.withLock { $0[id] = (holder, responder) }
    }

    /// Ends the request of this server holding the upload `id` while its body still
    /// arrives, if it began before `newer` (a newer request of the upload supersedes it:
    /// the client resumed while its old connection is still open on our side): that
    /// connection closes, and what it received is kept as a cut-off body is.
    func supersede(_ id: String, by newer: String) {
        guard let (holder, responder) = held.withLock({ $0[id] }), Self.number(holder) < Self.number(newer) else { return }
        responder.cut()
    }

    /// `holder` lets go of the upload `id` (nothing when another holds it now).
    func release(_ id: String, holder: String) {
        held.withLock { held in
            if held[id]?.holder == holder { held.removeValue(forKey: id) }
        }
    }

    /// The number of a holder of this server (holders are numbered in the order they came).
    private static func number(_ holder: String) -> UInt64 {
        UInt64(holder.split(separator: "/").last ?? "") ?? 0
    }

    /// The uploads held now, with their holders.
    var current: [String: String] { held.withLock { $0.mapValues(\.holder) } }
}
