import CatalogModels
import CatalogSchema

/// What a list call asks for. Validated by the caller; the store checks only the cursor.
public struct ListRequest: Sendable, Hashable {
    /// The order of a list.
    public enum Order: Sendable, Hashable {
        /// By a sortable field (its API name, such as `createdAt`), then by id.
        case field(String, descending: Bool)
        /// By full-text relevance to ``ListRequest/search``, best first.
        case relevance
        /// By distance from the ``Area/near(latitude:longitude:radiusMeters:)`` point, nearest first.
        case distance
    }

    /// A geographic filter on locations.
    public enum Area: Sendable, Hashable {
        /// Inside the box; `minLongitude > maxLongitude` means it crosses the antimeridian.
        case boundingBox(minLongitude: Double, minLatitude: Double, maxLongitude: Double, maxLatitude: Double)
        /// Within `radiusMeters` of the point (great-circle distance).
        case near(latitude: Double, longitude: Double, radiusMeters: Double)
    }

    /// Lists within one parent resource (declared by the resources' list filters and routes).
    public typealias Scope = ListScope

    /// The most bytes of items a list page holds: a page ends early, with a `nextCursor`,
    /// once its items have taken this much (it always holds at least one).
    public static let maxPageBytes = 1 << 20

    /// The largest page the API asks for.
    public static let maxLimit = 100

    /// The page size.
    public var limit: Int
    /// The order.
    public var order: Order
    /// The `nextCursor` of the previous page, if any.
    public var cursor: String?
    /// Full-text search terms.
    public var search: String?
    /// Geographic filters (locations only), all of which must hold: at most one circle
    /// and one box.
    public var areas: [Area]
    /// The parent resource the list is within, if any.
    public var scope: Scope?
    /// The fields each item shows.
    public var fields: FieldMask
    /// Who lists: hidden resources (private playlists) appear only to their owner and to
    /// those who see everything.
    public var viewer: Viewer

    /// Creates a request.
    public init(
        limit: Int = 20, order: Order = .field("createdAt", descending: false), cursor: String? = nil, search: String? = nil,
        areas: [Area] = [], scope: Scope? = nil, fields: FieldMask = .all, viewer: Viewer = .everything
    ) {
        self.viewer = viewer
        self.limit = limit
        self.order = order
        self.cursor = cursor
        self.search = search
        self.areas = areas
        self.scope = scope
        self.fields = fields
    }

    /// What the cursor is bound to: the order and every filter.
    var fingerprint: String {
        var text =
            switch order {
            case let .field(name, descending): descending ? "-" + name : name
            case .relevance: "relevance"
            case .distance: "distance"
            }
        text += "|"
        text += search ?? ""
        text += "|"
        if !areas.isEmpty { text += areas.map { "\($0)" }.joined(separator: "&") }
        if let scope { text += "|\(scope)" }
        return text
    }

    /// The circle of a `near` filter, if any.
    public var near: (latitude: Double, longitude: Double, radiusMeters: Double)? {
        for case let .near(latitude, longitude, radius) in areas { return (latitude, longitude, radius) }
        return nil
    }
}

/// Who reads: what decides whether hidden resources (private playlists) are shown.
public enum Viewer: Sendable, Hashable {
    /// Sees every resource: editors, admins and the server itself.
    case everything
    /// Sees what is not hidden, and what the user with this id owns (nothing, for `nil`: anonymous).
    case user(CatalogID?)
}

/// One page of results.
public struct ListPage<Model: Sendable>: Sendable {
    /// The items, in order.
    public let items: [Model]
    /// The cursor of the next page; `nil` on the last one.
    public let nextCursor: String?
}

/// Turns user search text into a safe full-text query (SQLite's FTS5, PostgreSQL's
/// tsquery): every word becomes a term, all of which must match: as a prefix when it has
/// two characters or more (in SQLite two- and three-character prefixes have their own
/// index), whole when it has one, so that no single letter expands to most of the
/// vocabulary. No query syntax from the user is ever interpreted.
public enum SearchQuery {
    /// The most words a search may hold.
    public static let maxWords = 8

    /// The words of `text`: its runs of letters and digits.
    public static func words(_ text: String) -> [String] {
        var words: [String] = []
        // ASCII text (most searches) by its bytes: the same words, without the grapheme
        // breaking and Unicode property lookups of `Character` (a third of a selective search's Swift).
        if text.utf8.allSatisfy({ $0 < 0x80 }) {
            var utf8 = Substring(text).utf8[...]
            while let start = utf8.firstIndex(where: Self.isASCIIWordByte) {
                let end = utf8[start...].firstIndex { !Self.isASCIIWordByte($0) } ?? utf8.endIndex
                words.append(String(Substring(utf8[start..<end])))
                utf8 = utf8[end...]
            }
            return words
        }
        var current = ""
        for character in text {
            if character.isLetter || character.isNumber {
                current.append(character)
            } else if !current.isEmpty {
                words.append(current)
                current = ""
            }
        }
        if !current.isEmpty { words.append(current) }
        return words
    }

    /// An ASCII letter or digit: what `Character.isLetter || isNumber` is in ASCII.
    private static func isASCIIWordByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): true
        default: false
        }
    }

    /// The words a search for `text` looks for (at most ``maxWords``: requests with more
    /// are refused before this), each matching as a prefix when it has two characters or more.
    public static func searched(_ text: String) -> [(word: String, prefix: Bool)] {
        words(text).prefix(maxWords).map { ($0, $0.count > 1) }
    }

    /// The FTS5 query, or `nil` when the text holds no letter or digit.
    public static func fts5(_ text: String) -> String? { fts5(searched(text)) }

    /// The FTS5 query of `words` (``searched(_:)``), or `nil` when there are none.
    public static func fts5(_ words: [(word: String, prefix: Bool)]) -> String? {
        guard !words.isEmpty else { return nil }
        return words.map { $0.prefix ? "\"\($0.word)\"*" : "\"\($0.word)\"" }.joined(separator: " ")
    }

    /// The words for `catalog_match` and `catalog_rank` (SQLite, ``CSQLite``) of `words`
    /// (``searched(_:)``): separated by spaces, each ending in `*` when it matches as a
    /// prefix, as in ``fts5(_:)-(String)``.
    public static func terms(_ words: [(word: String, prefix: Bool)]) -> String {
        words.map { $0.prefix ? "\($0.word)*" : $0.word }.joined(separator: " ")
    }

    /// The tsquery (for `to_tsquery('simple', …)`), or `nil` when the text holds no letter
    /// or digit. Words are runs of letters and digits, so nothing in them needs quoting.
    public static func tsquery(_ text: String) -> String? { tsquery(searched(text)) }

    /// The tsquery of `words` (``searched(_:)``), or `nil` when there are none.
    public static func tsquery(_ words: [(word: String, prefix: Bool)]) -> String? {
        guard !words.isEmpty else { return nil }
        return words.map { $0.prefix ? "\($0.word.lowercased()):*" : $0.word.lowercased() }.joined(separator: " & ")
    }
}
