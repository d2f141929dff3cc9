import Dispatch
import Synchronization

/// How many of the sampled rows recent searches matched, by their terms: a hint for how a
/// search runs (never what it finds), kept for 30 seconds, at most 1,024 searches.
final class SearchDensities: Sendable {
    private let counts = Mutex<[String: (matches: Int, at: UInt64)]>([:])
    private let floors = Mutex<(version: Int64, key: Int64)?>(nil)
    private static let lifetime: UInt64 = 30_000_000_000
    private static let capacity = 1_024

    /// The count for `terms`, from `sample` when none is kept or it is too old.
    func matches(_ terms: String, sample: () throws -> Int) throws -> Int {
        let now = DispatchTime.now().uptimeNanoseconds
        // (Another thread may have kept a count taken after this one took `now`.)
        if let kept = counts.withLock({ $0[terms] }), now < kept.at || now - kept.at < Self.lifetime { return kept.matches }
        let matches = try sample()
        counts.withLock { counts in
            if counts.count >= Self.capacity { counts.removeAll(keepingCapacity: true) }
            counts[terms] = (matches, now)
        }
        return matches
    }

    /// The key of the oldest row a sample reads, as of the database's `version`: kept for
    /// that version (a write changes it), read by `read` for another or when there is none.
    func floor(version: Int64?, read: () throws -> Int64) rethrows -> Int64 {
        if let version, let kept = floors.withLock({ $0 }), kept.version == version { return kept.key }
        let key = try read()
        if let version { floors.withLock { $0 = (version, key) } }
        return key
    }
}

/// The matches of recent searches, each in its list's order, for the database
/// version they were read at (``SQLDialect/writeVersion``): exactly what the index gives
/// while that version lasts. At most ``listLimit`` matches a search (the first ones in
/// its order: a page past them is looked up in the index), ``capacity`` in all (2 MiB of
/// them) and 1,024 searches: when full, it starts over.
final class SearchLists: Sendable {
    /// A search's matches: their `pk`s in order, and whether that is all of them.
    struct Matches: Sendable {
        let version: Int64
        let pks: [Int64]
        let complete: Bool
    }

    private struct Kept {
        var lists: [String: Matches] = [:]
        var count = 0
    }

    private let kept = Mutex(Kept())
    /// The most matches kept for one search.
    static let listLimit = 16_384
    /// The most matches kept for all of them.
    static let capacity = 262_144
    /// The most searches kept.
    static let searches = 1_024

    /// The matches of the search `key` at `version`, if kept.
    func matches(_ key: String, version: Int64) -> Matches? {
        kept.withLock { $0.lists[key] }.flatMap { $0.version == version ? $0 : nil }
    }

    /// Keeps `pks`, the matches of the search `key` at `version` in order (at most
    /// ``listLimit`` plus one: more means the list is not complete), and returns them as kept.
    func keep(_ key: String, version: Int64, pks: [Int64]) -> Matches {
        let matches = Matches(version: version, pks: Array(pks.prefix(Self.listLimit)), complete: pks.count <= Self.listLimit)
        kept.withLock { kept in
            if let old = kept.lists.removeValue(forKey: key) { kept.count -= old.pks.count }
            if kept.count + matches.pks.count > Self.capacity || kept.lists.count >= Self.searches { kept = Kept() }
            kept.lists[key] = matches
            kept.count += matches.pks.count
        }
        return matches
    }
}
