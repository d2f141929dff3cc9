import CatalogModels
import Foundation
import HTTPServer

/// Reads JSON request bodies: media type, syntax, shape, then each field against the
/// shared validation rules, collecting one error per failing field.
enum RequestBody {
    static let json = "application/json"
    static let mergePatch = "application/merge-patch+json"

    /// The body as a JSON object, after checking its media type is `mediaType`.
    static func object(_ request: HTTPRequest, mediaType: String) throws(APIError) -> [String: JSONValue] {
        try checkMediaType(request, mediaType)
        guard !request.body.isEmpty else {
            throw APIError(status: .badRequest, code: "bodyRequired", detail: "The request needs a JSON object body.")
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(request.body)
        } catch {
            throw APIError(status: .badRequest, code: "malformedJSON", detail: "The body is not valid JSON: \(error.reason) at byte \(error.offset).")
        }
        guard case let .object(object) = value else {
            throw APIError(status: .badRequest, code: "malformedJSON", detail: "The body must be a JSON object, not \(value.typeName).")
        }
        return object
    }

    private static func checkMediaType(_ request: HTTPRequest, _ expected: String) throws(APIError) {
        let header = request.headers["Content-Type"] ?? ""
        if header == expected { return }
        let parts = header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let charsetOK = parts.dropFirst().allSatisfy { parameter in
            !parameter.hasPrefix("charset=") || ["charset=utf-8", "charset=\"utf-8\""].contains(parameter)
        }
        guard parts.first == expected, charsetOK else {
            var failure = APIError(status: .unsupportedMediaType, code: "unsupportedMediaType",
                                   detail: "The body must be sent as \(expected)\(header.isEmpty ? "" : ", not \(header)").")
            failure.headers = expected == mergePatch ? [("Accept-Patch", mergePatch)] : []
            throw failure
        }
    }
}

/// The members a resource's request bodies may carry, and those only the server sets.
struct BodyFields: Sendable {
    /// Members a client may write.
    let writable: Set<String>
    /// This resource's members, besides ``FieldReader/readOnly``, that only the server sets.
    var readOnly: Set<String> = []
}

/// Reads the fields of one JSON object, checking each against its rule and collecting
/// every failure; unknown and read-only members are failures too.
struct FieldReader {
    private let object: [String: JSONValue]
    private(set) var errors: [FieldError] = []

    /// Members every resource has but no client may set.
    static let readOnly: Set<String> = ["id", "createdAt", "updatedAt", "version"]

    /// - Parameter readOnly: members of this resource, besides ``readOnly``, that only the server sets.
    init(_ object: [String: JSONValue], _ body: BodyFields) {
        self.init(object, fields: body.writable, readOnly: body.readOnly)
    }

    init(_ object: [String: JSONValue], fields: Set<String>, readOnly: Set<String> = []) {
        self.object = object
        for key in object.keys.sorted() where !fields.contains(key) {
            if Self.readOnly.contains(key) || readOnly.contains(key) {
                errors.append(Violation(.readOnly, "'\(key)' is set by the server and cannot be written.").at(Self.pointer(key)))
            } else {
                errors.append(Violation(.unknownField, "'\(key)' is not a field of this resource.").at(Self.pointer(key)))
            }
        }
    }

    /// A string member; `null` counts as absent.
    mutating func string(_ key: String, required: Bool, rule: (String) -> Violation?) -> String? {
        member(key, required: required, expected: "a string", rule: rule) { value in
            if case let .string(text) = value { text } else { nil }
        }
    }

    /// A number member; `null` counts as absent.
    mutating func number(_ key: String, required: Bool, rule: (Double) -> Violation?) -> Double? {
        member(key, required: required, expected: "a number", rule: rule) { value in
            if case let .number(number) = value { number } else { nil }
        }
    }

    /// An integer member (a JSON number without a fraction); `null` counts as absent.
    mutating func integer(_ key: String, required: Bool, in range: ClosedRange<Int>) -> Int? {
        let number = member(key, required: required, expected: "an integer", rule: { _ in nil }) { value -> Double? in
            if case let .number(number) = value, number.rounded() == number, abs(number) < 1e15 { number } else { nil }
        }
        guard let number else { return nil }
        guard range.contains(Int(number)) else {
            errors.append(Violation(.outOfRange, "Must be from \(range.lowerBound) to \(range.upperBound).").at(Self.pointer(key)))
            return nil
        }
        return Int(number)
    }

    /// An id member (a UUID string); `null` counts as absent.
    mutating func id(_ key: String, required: Bool) -> CatalogID? {
        let text = string(key, required: required) { CatalogID($0) == nil ? Violation(.invalidFormat, "Must be an id (a UUID).") : nil }
        return text.flatMap(CatalogID.init)
    }

    /// An array of ids with at most `maxCount` elements; one error per bad element
    /// (at most ``maxListedErrors``).
    mutating func ids(_ key: String, maxCount: Int) -> [CatalogID]? {
        let elements = member(key, required: true, expected: "an array", rule: { $0.count > maxCount ? Violation(.tooLong, "Must hold at most \(maxCount) ids.") : nil }) {
            value -> [JSONValue]? in if case let .array(elements) = value { elements } else { nil }
        }
        guard let elements else { return nil }
        var ids: [CatalogID] = []
        var failed = 0
        for (offset, element) in elements.enumerated() {
            if case let .string(text) = element, let id = CatalogID(text) {
                ids.append(id)
                continue
            }
            failed += 1
            if failed <= Self.maxListedErrors {
                errors.append(Violation(.invalidFormat, "Must be an id (a UUID).").at(Self.pointer(key) + "/\(offset)"))
            }
        }
        return failed == 0 ? ids : nil
    }

    /// How many element errors one array field lists at most.
    static let maxListedErrors = 100

    /// Reads `key` with `extract`, recording a missing, mistyped or rule-breaking value.
    private mutating func member<Value>(_ key: String, required: Bool, expected: String, rule: (Value) -> Violation?,
                                        extract: (JSONValue) -> Value?) -> Value? {
        guard let raw = object[key], raw != .null else {
            if required { errors.append(Violation(.required, "'\(key)' is required.").at(Self.pointer(key))) }
            return nil
        }
        guard let value = extract(raw) else {
            errors.append(Violation(.invalidType, "Must be \(expected), not \(raw.typeName).").at(Self.pointer(key)))
            return nil
        }
        if let violation = rule(value) {
            errors.append(violation.at(Self.pointer(key)))
            return nil
        }
        return value
    }

    /// An absolute http(s) URL member; `null` counts as absent.
    mutating func url(_ key: String, required: Bool) -> URL? {
        let text = member(key, required: required, expected: "a string", rule: { _ in nil }) { value -> String? in
            if case let .string(text) = value { text } else { nil }
        }
        guard let text else { return nil }
        switch Rules.parseWebURL(text) {
        case let .success(url):
            return url
        case let .failure(violation):
            errors.append(violation.at(Self.pointer(key)))
            return nil
        }
    }

    /// Fails with every collected error, if any.
    func finish() throws(APIError) {
        if !errors.isEmpty { throw .validation(errors) }
    }

    /// RFC 6901 pointer to a top-level member.
    static func pointer(_ key: String) -> String {
        "/" + key.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }
}
