import Foundation
import HTTPServer

/// Entity tags: a resource's `ETag` is its version in quotes, such as `"3"`.
enum ETag {
    static func header(_ version: Int) -> String { "\"\(version)\"" }

    /// Whether `If-None-Match` (weak comparison) matches `version`; false when absent.
    static func noneMatch(_ request: HTTPRequest, version: Int) throws(APIError) -> Bool {
        guard let header = request.headers["If-None-Match"] else { return false }
        guard let tags = try parse(header, name: "If-None-Match") else { return true }
        return tags.contains { $0.version == version }
    }

    /// The versions `If-Match` accepts (strong comparison: weak tags match nothing), or
    /// `nil` when there is no condition (`If-Match` absent or `*`).
    static func ifMatch(_ request: HTTPRequest) throws(APIError) -> Set<Int>? {
        guard let header = request.headers["If-Match"] else { return nil }
        guard let tags = try parse(header, name: "If-Match") else { return nil }
        return Set(tags.filter { !$0.weak }.compactMap(\.version))
    }

    /// Parses `*` (returns `nil`) or a list of entity tags.
    private static func parse(_ header: String, name: String) throws(APIError) -> [(weak: Bool, version: Int?)]? {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        if trimmed == "*" { return nil }
        var tags: [(weak: Bool, version: Int?)] = []
        for element in trimmed.split(separator: ",", omittingEmptySubsequences: true) {
            var tag = element.trimmingCharacters(in: .whitespaces)[...]
            let weak = tag.hasPrefix("W/")
            if weak { tag = tag.dropFirst(2) }
            guard tag.count >= 2, tag.first == "\"", tag.last == "\"", !tag.dropFirst().dropLast().contains("\"") else {
                throw .invalidHeader(name, "expected * or a list of entity tags such as \"3\".")
            }
            tags.append((weak, Int(tag.dropFirst().dropLast())))
        }
        guard !tags.isEmpty else { throw .invalidHeader(name, "expected * or a list of entity tags such as \"3\".") }
        return tags
    }
}
