import Synchronization

/// What the text of a list's statement is made of (``ResourceStore/listQuery(_:after:way:search:)``):
/// the same parts make the same SQL, so a resource makes each text once (``ListStatements``)
/// and a list binds only its arguments. The key holds every part of the text that differs
/// between lists of one resource; the rest is the resource's own (its table, select lists
/// and revision column, and its search shapes, of which `queued` names the one used), so
/// two lists that share a shape share exactly the same statement.
struct ListShape: Hashable {
    /// How the statement finds its rows.
    enum Way: Hashable {
        /// A list without a search.
        case plain
        /// A search, its matches from the full-text index (``ResourceStore/SearchWay``'s `index`).
        case index
        /// A search's matches in order (``ResourceStore/SearchWay``'s `ordered`).
        case ordered
        /// A search's walk along the list's order (``ResourceStore/SearchWay``'s `walk`).
        case walk
        /// A search's page of rows chosen by `pk` (``ResourceStore/SearchWay``'s `rows`).
        case rows
    }

    var way: Way
    /// The `FROM` clause of the rows listed, `t` among them.
    var from: String
    /// The conditions on `t`: the search's first (``searchFilters`` of them), then the list's own.
    var filters: [String]
    var searchFilters: Int
    /// The conditions on the sort key and id, outside (a radius, the cursor).
    var outerFilters: [String]
    /// The sort key's expression over `t`.
    var key: String
    var descending: Bool
    var relevance: Bool
    /// Whether the list is by distance (its select list fills the distance column).
    var distance: Bool
    /// Which of the resource's search shapes a search uses: the one that reads the index's queue.
    var queued: Bool
    /// Whether a plain list's page (not by distance) is at most ``ResourceStore/plainListBound``
    /// rows (``SQLDialect/limited(_:order:atMost:)``).
    var bounded: Bool
    /// Whether a plain list's rows come unless the database is unchanged since a page was
    /// kept (``SQLDialect/unlessUnchanged(_:)``): the last argument is that page's snapshot.
    var unlessUnchanged = false

    /// Hashes the parts that tell shapes apart, the texts by their lengths only (hashing
    /// their bytes cost some 4,000 instructions a statement); equality still compares them whole.
    func hash(into hasher: inout Hasher) {
        hasher.combine(way)
        hasher.combine(from.utf8.count)
        hasher.combine(filters.count)
        for filter in filters { hasher.combine(filter.utf8.count) }
        hasher.combine(searchFilters)
        hasher.combine(outerFilters.count)
        for filter in outerFilters { hasher.combine(filter.utf8.count) }
        hasher.combine(key.utf8.count)
        hasher.combine(descending)
        hasher.combine(relevance)
        hasher.combine(distance)
        hasher.combine(queued)
        hasher.combine(bounded)
        hasher.combine(unlessUnchanged)
    }
}

/// The texts of a resource's list statements, by shape: building one cost some 35,000
/// instructions (30 appends of strings), a third of a page at a random cursor and a tenth
/// of a search. At most ``capacity`` of them (shapes come from the resource's sorts,
/// scopes and filters, a few dozen); when full, it starts over.
final class ListStatements: Sendable {
    private let texts = Mutex<[ListShape: String]>([:])
    static let capacity = 256

    /// The text of `shape`, made by `make` the first time.
    func text(_ shape: ListShape, make: (ListShape) -> String) -> String {
        if let text = texts.withLock({ $0[shape] }) { return text }
        let text = make(shape)
        texts.withLock { texts in
            if texts.count >= Self.capacity { texts.removeAll(keepingCapacity: true) }
            texts[shape] = text
        }
        return text
    }
}
