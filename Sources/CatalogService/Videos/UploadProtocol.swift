import CatalogIdentity
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// Which resumable-upload protocol a request speaks, read from its head, and the fields
/// its answers carry in that protocol.
///
/// - **tus 1.0.0** (`Tus-Resumable: 1.0.0`): core, creation, creation-with-upload,
///   expiration, checksum (`sha1`, `sha256`) and termination.
/// - **The IETF resumable-upload draft** (`Upload-Draft-Interop-Version`), in the interop
///   versions URLSession speaks: 3 (iOS 17, `Upload-Incomplete`), 5 (iOS 18.0,
///   `Upload-Complete`), 6 (iOS 18.1+, `application/partial-upload`), and 7 and 8 (later
///   drafts, iOS 26). A creation is told it may resume by a `104` with the upload's URL.
/// - **Plain**: neither; a creation's body is the whole video (`curl -T`), and the upload's
///   other routes work as in the draft.
enum UploadDialect: Sendable, Equatable {
    case tus
    case draft(Int)
    case plain

    /// The tus version this server speaks.
    static let tusVersion = "1.0.0"
    /// The tus extensions it offers.
    static let tusExtensions = "creation,creation-with-upload,expiration,checksum,termination"
    /// The draft's interop versions it speaks.
    static let draftVersions: Set<Int> = [3, 4, 5, 6, 7, 8]

    /// The dialect of `request`. A tus version other than 1.0.0 is a 412 naming the one
    /// spoken; a draft version it does not speak makes an ordinary request (as the draft says).
    init(_ request: HTTPRequest) throws(APIError) {
        if let version = request.headers["tus-resumable"] {
            guard version == Self.tusVersion else {
                throw APIError(
                    status: .preconditionFailed, code: "unsupportedTusVersion", detail: "This server speaks tus \(Self.tusVersion).",
                    headers: [("Tus-Version", Self.tusVersion), ("Tus-Resumable", Self.tusVersion)])
            }
            self = .tus
        } else if let text = request.headers["upload-draft-interop-version"], let version = Int(text), Self.draftVersions.contains(version) {
            self = .draft(version)
        } else {
            self = .plain
        }
    }

    /// The fields every answer in this dialect carries.
    var fields: [(name: String, value: String)] {
        switch self {
        case .tus: [("Tus-Resumable", Self.tusVersion)]
        case let .draft(version): [("Upload-Draft-Interop-Version", String(version))]
        case .plain: []
        }
    }

    /// Whether the request says it completes the upload (the draft's `Upload-Complete: ?1`,
    /// or in interop version 3 `Upload-Incomplete: ?0`); `nil` when it does not say (tus,
    /// where the length decides, and a plain request: complete).
    func completes(_ request: HTTPRequest) throws(APIError) -> Bool? {
        guard case let .draft(version) = self else { return nil }
        let name = version == 3 ? "upload-incomplete" : "upload-complete"
        guard let field = request.headers[name] else { return nil }
        guard let flag = Self.structuredBoolean(field) else { throw APIError.invalidHeader(name, "Must be ?1 or ?0.") }
        return version == 3 ? !flag : flag
    }

    /// The fields saying whether an upload is complete, in this dialect.
    func completeness(_ complete: Bool) -> [(name: String, value: String)] {
        guard case let .draft(version) = self else { return [] }
        return version == 3 ? [("Upload-Incomplete", complete ? "?0" : "?1")] : [("Upload-Complete", complete ? "?1" : "?0")]
    }

    /// What an upload's offset retrieval and its appends' answers say of it: its offset and
    /// length, and (tus) its expiry and metadata, or (draft) whether it is complete and the limits.
    func state(_ row: VideoRow, maxBytes: Int) -> [(name: String, value: String)] {
        var fields = fields + [("Upload-Offset", String(row.progress.offset)), ("Upload-Length", String(row.progress.length))]
        switch self {
        case .tus:
            if let expires = row.expires { fields.append(("Upload-Expires", HTTPDate.format(Int(expires / 1000)))) }
            if !row.metadata.isEmpty { fields.append(("Upload-Metadata", row.metadata)) }
        case .draft, .plain:
            fields += completeness(row.progress.offset == row.progress.length)
            fields.append(("Upload-Limit", "max-size=\(maxBytes)"))
        }
        return fields
    }

    /// `?1` → true, `?0` → false (an RFC 8941 boolean).
    static func structuredBoolean(_ text: String) -> Bool? {
        switch text.trimmingCharacters(in: .whitespaces) {
        case "?1": true
        case "?0": false
        default: nil
        }
    }

    /// A non-negative integer field (`Upload-Offset`, `Upload-Length`) of at most 19 digits.
    static func integer(_ request: HTTPRequest, _ name: String) throws(APIError) -> Int? {
        guard let text = request.headers[name] else { return nil }
        guard (1...19).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(text) else {
            throw APIError.invalidHeader(name, "Must be a non-negative integer.")
        }
        return value
    }
}

/// A tus `Upload-Checksum` (`sha1` or `sha256`, then the digest in base64).
struct UploadChecksum: Sendable {
    let algorithm: RunningDigest.Algorithm
    let expected: [UInt8]

    /// The checksum `request` carries, if any; 400 for an algorithm not offered or a malformed one.
    init?(_ request: HTTPRequest) throws(APIError) {
        guard let field = request.headers["upload-checksum"] else { return nil }
        let parts = field.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2, let algorithm = RunningDigest.Algorithm(rawValue: String(parts[0])) else {
            throw APIError(
                status: .badRequest, code: "unsupportedChecksum", detail: "Upload-Checksum is sha1 or sha256 and the digest in base64.",
                headers: [("Tus-Checksum-Algorithm", Self.algorithms)])
        }
        guard let expected = Data(base64Encoded: String(parts[1])).map(Array.init), expected.count == algorithm.length else {
            throw APIError.invalidHeader("Upload-Checksum", "The digest is not \(algorithm.length) bytes in base64.")
        }
        self.algorithm = algorithm
        self.expected = expected
    }

    /// The algorithms offered (`Tus-Checksum-Algorithm`).
    static let algorithms = "sha1,sha256"
}

/// tus `Upload-Metadata`: `key base64,key base64,…`, kept as sent (at most
/// ``VideoRules/maxMetadataBytes``), shown back by the offset retrieval and never trusted
/// for anything (a file name is the client's word).
enum UploadMetadata {
    /// The metadata `request` carries (empty when none), checked for its form.
    static func read(_ request: HTTPRequest) throws(APIError) -> String {
        guard let text = request.headers["upload-metadata"], !text.isEmpty else { return "" }
        guard text.utf8.count <= VideoRules.maxMetadataBytes else {
            throw APIError.invalidHeader("Upload-Metadata", "At most \(VideoRules.maxMetadataBytes) bytes.")
        }
        var keys = Set<Substring>()
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: " ", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let key = parts.first, !key.isEmpty, keys.insert(key).inserted,
                key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") }),
                parts.count == 1 || Data(base64Encoded: String(parts[1])) != nil
            else {
                throw APIError.invalidHeader("Upload-Metadata", "Must be comma-separated pairs of a key and a base64 value, each key once.")
            }
        }
        return text
    }
}
