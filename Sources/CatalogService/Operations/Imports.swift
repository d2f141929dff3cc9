import CatalogModels
import CatalogStore
import Foundation
import HTTPServer

/// `POST /admin/import`: records of a catalog export, applied in one transaction with
/// their ids, times and versions (`catalog import` sends an export file in batches).
/// Every record is checked like a body of its resource (shape, unknown members, the
/// shared rules) before anything is written; 422 names `/records/N/…`.
struct Imports: Sendable {
    let store: CatalogStore

    /// The members each kind of record's `data` has; the optional ones may be absent.
    private static let members: [String: (required: Set<String>, optional: Set<String>)] = {
        let stamps: Set<String> = ["id", "createdAt", "updatedAt", "version"]
        return [
            "game": (stamps.union(["name", "description", "imageName"]), []),
            "location": (stamps.union(["name", "countryCode", "latitude", "longitude"]), []),
            "playableItem": (stamps.union(["title", "description", "streamURL"]), ["thumbnailURL", "durationSeconds"]),
            "playlist": (stamps.union(["title", "description", "entries"]), []),
            "comment": (stamps.union(["playableItemId", "author", "deleted", "replyCount"]), ["parentId", "body"]),
        ]
    }()

    /// The largest version accepted (2^53 − 1: exact in every JSON reader).
    static let maxVersion = 9_007_199_254_740_991

    func apply(_ request: HTTPRequest, _ done: @escaping @Sendable (Result<HTTPResponse, any Error>) -> Void) throws {
        let object = try RequestBody.object(request, mediaType: RequestBody.json)
        try FieldReader(object, fields: ["records"]).finish()
        guard case let .array(elements)? = object["records"] else {
            throw APIError.validation([Violation(.required, "'records' must be an array of records.").at("/records")])
        }
        guard elements.count <= ImportRequest.maxRecords else {
            throw APIError.validation([Violation(.tooLong, "At most \(ImportRequest.maxRecords) records per request.").at("/records")])
        }
        var errors: [FieldError] = []
        for (index, element) in elements.enumerated() { errors += Self.shapeErrors(element, at: "/records/\(index)") }
        guard errors.isEmpty else { throw APIError.validation(Array(errors.prefix(FieldReader.maxListedErrors))) }
        let records: [CatalogRecord]
        do {
            records = try CatalogJSON.makeDecoder().decode(ImportRequest.self, from: Data(request.body)).records
        } catch let error as DecodingError {
            throw APIError.validation([Self.fieldError(error)])
        }
        for (index, record) in records.enumerated() { errors += Self.ruleErrors(record, at: "/records/\(index)/data") }
        guard errors.isEmpty else { throw APIError.validation(Array(errors.prefix(FieldReader.maxListedErrors))) }
        store.importRecords(records) { result in
            done(result.flatMap { summary in
                Result { HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType)], body: Array(try JSONResponse.encoder.encode(summary))) }
            })
        }
    }

    /// `{"type", "data"}` with a known type and exactly that type's members.
    private static func shapeErrors(_ element: JSONValue, at pointer: String) -> [FieldError] {
        guard case let .object(record) = element else { return [Violation(.invalidType, "Must be an object.").at(pointer)] }
        var errors = FieldReader(record, fields: ["type", "data"]).errors.map { FieldError(pointer: pointer + $0.pointer, code: $0.code, message: $0.message) }
        guard case let .string(type)? = record["type"], let members = Self.members[type] else {
            return errors + [Violation(.invalidFormat, "Must be one of \(CatalogRecord.types.joined(separator: ", ")).").at(pointer + "/type")]
        }
        guard case let .object(data)? = record["data"] else { return errors + [Violation(.invalidType, "Must be an object.").at(pointer + "/data")] }
        for key in data.keys.sorted() where !members.required.contains(key) && !members.optional.contains(key) {
            errors.append(Violation(.unknownField, "'\(key)' is not a member of a \(type) record.").at(pointer + "/data" + FieldReader.pointer(key)))
        }
        for key in members.required.sorted() where data[key] == nil {
            errors.append(Violation(.required, "'\(key)' is required.").at(pointer + "/data" + FieldReader.pointer(key)))
        }
        if type == "playlist", case let .array(entries)? = data["entries"] {
            for (offset, entry) in entries.enumerated() {
                guard case let .object(fields) = entry else { continue }
                let reader = FieldReader(fields, fields: ["entryId", "playableItemId", "addedAt"])
                errors += reader.errors.map { FieldError(pointer: pointer + "/data/entries/\(offset)" + $0.pointer, code: $0.code, message: $0.message) }
            }
        }
        return errors
    }

    /// The shared validation rules, as for bodies of each resource.
    private static func ruleErrors(_ record: CatalogRecord, at pointer: String) -> [FieldError] {
        var errors: [FieldError]
        let version: Int
        switch record {
        case let .game(game): (errors, version) = (GameInput(game).validationErrors(), game.version)
        case let .location(location): (errors, version) = (LocationInput(location).validationErrors(), location.version)
        case let .playableItem(item): (errors, version) = (PlayableItemInput(item).validationErrors(), item.version)
        case let .playlist(playlist):
            (errors, version) = (PlaylistInput(title: playlist.title, description: playlist.description).validationErrors(), playlist.version)
            if playlist.entries.count > PlaylistOrder.maxEntries {
                errors.append(Violation(.tooLong, "A playlist holds at most \(PlaylistOrder.maxEntries) entries.").at("/entries"))
            }
            var seen = Set<CatalogID>()
            for (offset, entry) in playlist.entries.enumerated() where !seen.insert(entry.entryId).inserted {
                errors.append(Violation(.invalidFormat, "Repeats an entryId of this playlist.").at("/entries/\(offset)/entryId"))
            }
        case let .comment(comment):
            version = comment.version
            errors = CommentInput(author: comment.author, body: comment.body ?? "-").validationErrors()
            if comment.deleted == (comment.body != nil) {
                errors.append(Violation(.invalidFormat, "A deleted comment has no body; any other comment has one.").at("/body"))
            }
            if comment.replyCount < 0 || (comment.parentId != nil && comment.replyCount != 0) {
                errors.append(Violation(.outOfRange, "Must be 0 for a reply, and never negative.").at("/replyCount"))
            }
        }
        if !(1...Self.maxVersion).contains(version) { errors.append(Violation(.outOfRange, "Must be from 1 to \(Self.maxVersion).").at("/version")) }
        return errors.map { FieldError(pointer: pointer + $0.pointer, code: $0.code, message: $0.message) }
    }

    /// A decoding failure as the field it is about.
    private static func fieldError(_ error: DecodingError) -> FieldError {
        let (path, message): ([any CodingKey], String) = switch error {
        case let .typeMismatch(type, context): (context.codingPath, "Must be \(type): \(context.debugDescription)")
        case let .valueNotFound(_, context): (context.codingPath, "Must not be null.")
        case let .keyNotFound(key, context): (context.codingPath + [key], "'\(key.stringValue)' is required.")
        case let .dataCorrupted(context): (context.codingPath, context.debugDescription)
        @unknown default: ([], "The record cannot be read.")
        }
        let pointer = path.map { "/" + ($0.intValue.map(String.init) ?? $0.stringValue) }.joined()
        return Violation(.invalidFormat, message).at(pointer)
    }
}
