import Foundation

/// Any JSON value, decoded strictly (a number is never a boolean and vice versa), for
/// reading request bodies field by field and applying merge patches.
enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case let .bool(value): try container.encode(value)
        case let .number(value): try container.encode(value)
        case let .string(value): try container.encode(value)
        case let .array(value): try container.encode(value)
        case let .object(value): try container.encode(value)
        }
    }

    /// The JSON type's name, for error messages.
    var typeName: String {
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
    static func mergePatch(_ target: JSONValue, _ patch: JSONValue) -> JSONValue {
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
