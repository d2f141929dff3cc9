import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer
import Logging
import Synchronization

/// The uploads' refusals, as each dialect answers them.
extension VideoUploads {
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
