import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer
import Logging
import Synchronization

/// Appending: a request takes the upload, its body streams into a sink, and what arrived
/// is kept (synced, recorded) or dropped.
extension VideoUploads {
    /// How many times (a tenth of a second apart) a request waits for another one appending
    /// to the same upload to end, before it is refused with 423.
    static let waitsForHolder = 30

    /// Takes `row` for this request at `offset`, opens its append, and takes the body
    /// into it; once the body ended, keeps it (or drops it) and answers with `answer`.
    /// While an older request holds it, this one ends that request (when it is this
    /// server's and its body still arrives) and waits for it to let go.
    func take(
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
    func ended(
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
}
