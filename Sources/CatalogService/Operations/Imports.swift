import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import HTTPServer

/// `POST /admin/import`: records of a catalog export, applied in one transaction with
/// their ids, times and versions (`catalog import` sends an export file in batches).
/// Every record's `data` is read by its resource's declared import reader — the same
/// kinds and rules as a body of the resource, plus the stamps and server-set members an
/// export carries — before anything is written; 422 names `/records/N/…`.
struct Imports: Sendable {
    let store: CatalogStore

    /// The resources by the `type` of their records.
    private static let schemas = Dictionary(uniqueKeysWithValues: ResourceSchema.all.map { ($0.type, $0) })

    func apply(_ request: HTTPRequest, _ options: WriteOptions, _ done: @escaping @Sendable (Result<HTTPResponse, any Error>) -> Void) throws {
        let object = try RequestBody.object(request, mediaType: RequestBody.json)
        let unknown = DocumentShape.unacceptedMembers(object, accepting: { $0 == "records" })
        guard unknown.isEmpty else { throw APIError.validation(unknown) }
        guard case let .array(elements)? = object["records"] else {
            throw APIError.validation([Violation(.required, "'records' must be an array of records.").at("/records")])
        }
        guard elements.count <= ImportRequest.maxRecords else {
            throw APIError.validation([Violation(.tooLong, "At most \(ImportRequest.maxRecords) records per request.").at("/records")])
        }
        var errors = FieldErrors()
        var records: [ImportRecord] = []
        for (index, element) in elements.enumerated() {
            switch Self.record(element, at: "/records/\(index)") {
            case let .success(record): records.append(record)
            case let .failure(failures): errors.append(contentsOf: failures.errors)
            }
        }
        guard errors.isEmpty else { throw APIError.validation(errors) }
        store.importRecords(records, options: options) { result in
            done(
                result.flatMap { summary in
                    Result { HTTPResponse(status: .ok, headers: [("Content-Type", JSONResponse.contentType)], body: Array(try JSONResponse.encoder.encode(summary))) }
                })
        }
    }

    /// Why a record cannot be imported: every failing member, with its pointer.
    private struct Failures: Error {
        let errors: FieldErrors
    }

    /// `{"type", "data"}` with a known type, its data read as an import record of that resource.
    private static func record(_ element: JSONValue, at pointer: String) -> Result<ImportRecord, Failures> {
        guard case let .object(record) = element else {
            return .failure(Failures(errors: FieldErrors([Violation(.invalidType, "Must be an object.").at(pointer)])))
        }
        var errors = FieldErrors()
        errors.append(contentsOf: DocumentShape.unacceptedMembers(record, accepting: { $0 == "type" || $0 == "data" }), prefixing: pointer)
        guard case let .string(type)? = record["type"], let schema = schemas[type] else {
            let types = ResourceSchema.all.map(\.type).joined(separator: ", ")
            errors.append(Violation(.invalidFormat, "Must be one of \(types).").at(pointer + "/type"))
            return .failure(Failures(errors: errors))
        }
        guard case let .object(data)? = record["data"] else {
            errors.append(Violation(.invalidType, "Must be an object.").at(pointer + "/data"))
            return .failure(Failures(errors: errors))
        }
        let (values, failures) = schema.importRecord.read(data)
        errors.append(contentsOf: failures.isEmpty ? FieldErrors(schema.recordRules(values)) : failures, prefixing: pointer + "/data")
        return errors.isEmpty ? .success(ImportRecord(schema: schema, values: values)) : .failure(Failures(errors: errors))
    }
}
