import CatalogStore
import HTTPServer

/// Entity tags: a resource's `ETag` is its version in quotes, such as `"3"`. Tags are
/// compared as text, so `"03"` or `"+3"` never match version 3.
enum ETag {
    static func header(_ version: Int) -> String { "\"\(version)\"" }

    /// Whether a `GET`'s `If-None-Match` (weak comparison) matches `version`.
    static func noneMatch(_ request: HTTPRequest, version: Int) throws(APIError) -> Bool {
        try tags(request, "If-None-Match", weakMatches: true)?.matches(version) ?? false
    }

    /// The `If-Match` (strong comparison) and `If-None-Match` (weak comparison)
    /// conditions of a write.
    static func preconditions(_ request: HTTPRequest) throws(APIError) -> WritePreconditions {
        WritePreconditions(ifMatch: try tags(request, "If-Match", weakMatches: false),
                           ifNoneMatch: try tags(request, "If-None-Match", weakMatches: true))
    }

    /// Parses every `name` field as `*` or a list of entity tags; `nil` when absent.
    /// Weak tags (`W/"3"`) count only when `weakMatches`.
    private static func tags(_ request: HTTPRequest, _ name: String, weakMatches: Bool) throws(APIError) -> WritePreconditions.Tags? {
        let fields = request.headers.values(for: name)
        guard !fields.isEmpty else { return nil }
        let elements = fields.joined(separator: ",").split(separator: ",").map { $0.trimmingCharacters(in: " \t") }.filter { !$0.isEmpty }
        if elements == ["*"] { return .any }
        guard !elements.isEmpty else { throw malformed(name) }
        var versions = Set<Int>()
        for element in elements {
            var tag = element[...]
            let weak = tag.hasPrefix("W/")
            if weak { tag = tag.dropFirst(2) }
            guard tag.count >= 2, tag.first == "\"", tag.last == "\"" else { throw malformed(name) }
            let opaque = tag.dropFirst().dropLast()
            guard !opaque.contains("\"") else { throw malformed(name) }
            // Only a canonical decimal names one of our versions.
            if weak && !weakMatches { continue }
            if let version = Int(opaque), String(version) == opaque { versions.insert(version) }
        }
        return .versions(versions)
    }

    private static func malformed(_ name: String) -> APIError {
        .invalidHeader(name, "expected * or a list of entity tags such as \"3\".")
    }
}

private extension Substring {
    func trimmingCharacters(in set: String) -> Substring {
        var slice = self
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return slice
    }
}
