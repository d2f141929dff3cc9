import CatalogModels

/// How a playlist's entries are ordered: by a sparse integer key (`sort_key`), so that
/// inserting, moving or removing one entry writes that entry's row alone.
///
/// Keys start ``spacing`` apart and stay in `0...maxKey`. A new place takes the key
/// halfway between its neighbours'; only when they have no integer between them does
/// ``spread(_:at:)`` give a window of entries around the place new keys, evenly apart.
/// The window grows (16, 32, 64… entries) until its keys would be at least
/// ``minimumGap(_:)`` apart, a gap that grows with the square of the window, so a large
/// window leaves room for many writes before it fills: a rebalancing is rare and touches
/// few rows (the whole playlist is its bound). Inserting again and again at one place,
/// the worst case, rewrites about four rows per insert on average.
enum EntryOrder {
    /// The distance between the keys of entries written in one go.
    static let spacing: Int64 = 1 << 32
    /// The highest key.
    static let maxKey = ChangedEntry.orderKeys.upperBound
    /// The least distance a rebalanced window of `count` keys leaves between them:
    /// 256·count² (74,000 for the first window of 17, 2^32 for a whole playlist of 4,096).
    static func minimumGap(_ count: Int) -> Int64 {
        Int64(count) * Int64(count) << 8
    }

    /// A key strictly between `before` (`nil`: the start) and `after` (`nil`: the end),
    /// or `nil` when there is no room (then ``spread(_:at:)`` makes some).
    static func key(between before: Int64?, and after: Int64?) -> Int64? {
        switch (before, after) {
        case (nil, nil):
            return spacing
        case let (before?, nil):
            return before <= maxKey - spacing ? before + spacing : nil
        case let (nil, after?):
            return after >= spacing ? after - spacing : after >= 1 ? after / 2 : nil
        case let (before?, after?):
            return after - before >= 2 ? before + (after - before) / 2 : nil
        }
    }

    /// Room for a new entry at `slot` (0…`keys.count`) among entries whose keys are
    /// `keys` (ascending): the new keys of a window of them, and the new entry's key.
    /// - Returns: `changed`, the indices into `keys` whose key changes with their new key,
    ///   and `key`, the new entry's.
    static func spread(_ keys: [Int64], at slot: Int) -> (changed: [(index: Int, key: Int64)], key: Int64) {
        var half = 8
        while true {
            let start = max(0, slot - half), end = min(keys.count, slot + half)
            let low = start == 0 ? -1 : keys[start - 1]
            let high = end == keys.count ? maxKey + 1 : keys[end]
            // The window's entries and the new one, evenly apart in (low, high).
            let count = Int64(end - start + 1)
            let step = (high - low) / (count + 1)
            if step >= minimumGap(Int(count)) || (start == 0 && end == keys.count) {
                var changed: [(index: Int, key: Int64)] = []
                var key: Int64 = 0
                for place in 0..<Int(count) {
                    let spread = low + step * Int64(place + 1)
                    let index = start + place - (place > slot - start ? 1 : 0)
                    if place == slot - start {
                        key = spread
                    } else if keys[index] != spread {
                        changed.append((index, spread))
                    }
                }
                return (changed, key)
            }
            half *= 2
        }
    }

    /// Keys for a whole new order that rewrite the fewest kept entries: `current[p]` is
    /// the key of the kept entry going to place `p`, `nil` for a new entry there. The
    /// longest run of kept keys already in order keeps its keys; the others get keys
    /// evenly between theirs (all of them anew, ``spacing`` apart, when some gap is too
    /// narrow).
    static func keys(for current: [Int64?]) -> [Int64] {
        let kept = longestIncreasing(current)
        var keys = [Int64](repeating: 0, count: current.count)
        var previous: Int64 = -1
        var place = 0
        for anchor in kept + [current.count] {
            // Places place..<anchor lie between `previous` and the anchor's key (the end: none).
            let count = Int64(anchor - place)
            if count > 0 {
                let next = anchor < current.count ? current[anchor] ?? 0 : nil
                let step: Int64
                if let next {
                    step = min(spacing, (next - previous) / (count + 1))
                } else {
                    step = previous <= maxKey - spacing * count ? spacing : 0
                }
                guard step >= 1 else { return current.indices.map { Int64($0 + 1) * spacing } }
                for offset in 0..<Int(count) { keys[place + offset] = previous + step * Int64(offset + 1) }
            }
            if anchor < current.count, let key = current[anchor] {
                keys[anchor] = key
                previous = key
            }
            place = anchor + 1
        }
        return keys
    }

    /// The places of a longest strictly increasing run of the non-nil keys, ascending
    /// (patience sorting, O(n log n)).
    static func longestIncreasing(_ keys: [Int64?]) -> [Int] {
        // tails[k]: the place ending the best run of length k + 1 found so far.
        var tails: [Int] = []
        var previous = [Int](repeating: -1, count: keys.count)
        for (place, key) in keys.enumerated() {
            guard let key else { continue }
            var low = 0, high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if keys[tails[middle]] ?? 0 < key { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[place] = tails[low - 1] }
            if low == tails.count { tails.append(place) } else { tails[low] = place }
        }
        var run: [Int] = []
        var place = tails.last ?? -1
        while place >= 0 {
            run.append(place)
            place = previous[place]
        }
        return run.reversed()
    }
}
