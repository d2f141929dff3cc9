import Foundation

/// Any JSON value, parsed strictly by ``parse(_:)``: a number is never a boolean and
/// vice versa, duplicate member names and nesting deeper than ``maxDepth`` are errors.
/// Used to read request bodies field by field and to apply merge patches.
package enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The deepest nesting of arrays and objects accepted.
    package static let maxDepth = 64
    /// The most members one object holds: far more than any document of the API has, so
    /// that reading a body of tens of thousands of members stops early.
    package static let maxMembers = 1024

    /// Why a document is not JSON, and where.
    package struct ParseError: Error, Equatable {
        /// The byte offset of the fault.
        package let offset: Int
        /// What is wrong there.
        package let reason: String
    }

    /// Parses one JSON text (RFC 8259), with nothing but whitespace around it.
    package static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(ParseError) -> JSONValue {
        var parser = JSONParser(Array(bytes))
        return try parser.document()
    }

    /// The JSON type's name, for error messages.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// RFC 7396 JSON Merge Patch: `patch` applied to `target`.
    package static func mergePatch(_ target: JSONValue, _ patch: JSONValue) -> JSONValue {
        guard case let .object(changes) = patch else { return patch }
        var result: [String: JSONValue]
        if case let .object(existing) = target { result = existing } else { result = [:] }
        for (key, value) in changes {
            if value == .null {
                result[key] = nil
            } else {
                result[key] = mergePatch(result[key] ?? .null, value)
            }
        }
        return .object(result)
    }
}
