#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a `GET` with `Range` (and `If-Range`) asks of a representation `size` bytes long
/// (RFC 9110 §14): the whole of it, one range of it, or nothing it holds.
public enum RangeRequest: Sendable, Equatable {
    /// The whole representation (200): no `Range`, one the server ignores (a unit other
    /// than `bytes`, a malformed one, several ranges, a failed `If-Range`), or a method
    /// other than `GET`.
    case whole
    /// The bytes `range` (206 with `Content-Range: bytes first-last/size`).
    case part(Range<Int>)
    /// No byte of it (416 with `Content-Range: bytes */size`).
    case unsatisfiable

    /// What `request` asks of a representation of `size` bytes whose validators are
    /// `etag` (a strong entity tag, quoted) and `lastModified` (an HTTP-date), for `If-Range`.
    public init(_ request: HTTPRequest, size: Int, etag: String?, lastModified: String?, lastModifiedIsStrong: Bool = true) {
        guard request.method == .GET, let field = request.headers["range"] else {
            self = .whole
            return
        }
        if let condition = request.headers["if-range"] {
            // A strong entity tag matches exactly; a date matches the last modification
            // exactly, when that is a strong validator (a second or more before now: RFC
            // 9110 §8.8.2.2); a weak tag never does.
            let matches = condition.hasPrefix("\"") ? condition == etag : (lastModified.map { condition == $0 && lastModifiedIsStrong } ?? false)
            guard matches else {
                self = .whole
                return
            }
        }
        self = Self.parse(field, size: size)
    }

    /// The one range `field` names within `size` bytes (`bytes=first-last`, `bytes=first-`,
    /// `bytes=-suffix`), clamped to the end; several ranges or bad syntax are ignored.
    static func parse(_ field: String, size: Int) -> RangeRequest {
        let trimmed = field.trimmingSpaces
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "bytes=" else { return .whole }
        let spec = trimmed.dropFirst(6).trimmingSpaces
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingSpaces, last = spec[spec.index(after: dash)...].trimmingSpaces
        guard first.allSatisfy(\.isASCIIDigit), last.allSatisfy(\.isASCIIDigit), !(first.isEmpty && last.isEmpty) else { return .whole }
        // Digits beyond what an Int holds are as good as infinity here.
        let start = first.isEmpty ? nil : (Int(first) ?? .max)
        let end = last.isEmpty ? nil : (Int(last) ?? .max)
        switch (start, end) {
        case let (start?, end?):
            guard start <= end else { return .whole }
            guard start < size else { return .unsatisfiable }
            return .part(start..<min(end, size - 1) + 1)
        case let (start?, nil):
            guard start < size else { return .unsatisfiable }
            return .part(start..<size)
        case let (nil, suffix?):
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(max(0, size - suffix)..<size)
        case (nil, nil):
            return .whole
        }
    }
}

extension HTTPResponse {
    /// `file` answering `request` as a static resource: `Accept-Ranges: bytes`, its
    /// validators (`ETag`, `Last-Modified`), 304 for a matching `If-None-Match`, and the
    /// whole file (200), one range of it (206 with `Content-Range`, honouring `If-Range`),
    /// or 416 with `Content-Range: bytes */size`. `HEAD` is answered as `GET` without
    /// the body (the server leaves it out). The caller adds `Cache-Control`.
    public static func serving(_ file: ResponseFile, for request: HTTPRequest, contentType: String, etag: String) -> HTTPResponse {
        let lastModified = HTTPDate.format(file.modified)
        var response = HTTPResponse(
            status: .ok, headers: [("Content-Type", contentType), ("Accept-Ranges", "bytes"), ("ETag", etag), ("Last-Modified", lastModified)])
        if let match = request.headers["if-none-match"], EntityTags.weaklyMatches(match, etag) {
            response.status = .notModified
            return response
        }
        let strong = file.modified < Int(time(nil)) - 1
        switch RangeRequest(request, size: file.size, etag: etag, lastModified: lastModified, lastModifiedIsStrong: strong) {
        case .whole:
            response.file = file
        case let .part(range):
            response.status = .partialContent
            response.headers.append(("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(file.size)"))
            response.file = file.part(range)
        case .unsatisfiable:
            response.status = .rangeNotSatisfiable
            response.headers = [("Content-Type", "text/plain; charset=utf-8"), ("Accept-Ranges", "bytes"), ("Content-Range", "bytes */\(file.size)")]
            response.body = Array("The range is outside the \(file.size) bytes of this resource.\n".utf8)
        }
        return response
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: SubSequence {
        let start = firstIndex { $0 != " " && $0 != "\t" } ?? endIndex
        let end = lastIndex { $0 != " " && $0 != "\t" }.map(index(after:)) ?? start
        return self[start..<Swift.max(start, end)]
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

/// Entity-tag comparisons of conditional requests.
public enum EntityTags {
    /// Whether the `If-None-Match` field `field` lists `tag` or `*`, by the weak comparison
    /// (RFC 9110 §13.1.2: `W/"x"` matches `"x"`).
    public static func weaklyMatches(_ field: String, _ tag: String) -> Bool {
        let opaque = tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
        return field.split(separator: ",").contains { listed in
            let trimmed = listed.trimmingSpaces
            return trimmed == "*" || (trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed) == opaque
        }
    }
}
