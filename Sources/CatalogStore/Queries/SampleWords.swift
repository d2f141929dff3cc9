import Dispatch
import Synchronization

/// The words of a resource's newest rows, to count how many of them a search matches
/// without asking the full-text index: the index's set-up of a query alone cost some
/// 30,000 instructions, and a search paid it twice (for this count, then for its page).
///
/// The count only chooses how a search runs (``ResourceStore/walksSearch(_:_:_:version:)``),
/// never what it finds. It is exact where it is given: the sampled rows' text and the
/// search's words are ASCII, which FTS5's `unicode61` tokenizer splits into runs of letters
/// and digits folded to lower case, as this does (and as `catalog_match` does, in `CSQLite`).
/// Where either is not, or the rows hold more than ``maxTokens`` different words, there is
/// no count here and the index is asked as before.
///
/// The words are read again when the database has changed, at most once a second: a
/// count may be a second old, as the counts ``SearchDensities`` keeps may be 30 seconds old.
final class SampleWords: Sendable {
    /// The distinct tokens of the sampled rows, in byte order, and for each the rows that
    /// hold it (bit `i` of the mask: the `i`-th newest row).
    struct Words: Sendable {
        /// The tokens' bytes, one after another; token `i` is `bytes[starts[i]..<starts[i + 1]]`.
        let bytes: [UInt8]
        let starts: [Int]
        let rows: [SIMD4<UInt64>]

        /// How many of the rows hold every one of `words` (each a token, or a prefix of one
        /// when `prefix`); `nil` when a word is not ASCII letters and digits.
        func matches(_ words: [(word: String, prefix: Bool)]) -> Int? {
            var all = SIMD4<UInt64>(repeating: .max)
            for (word, prefix) in words {
                var folded = Array(word.utf8)
                for index in folded.indices {
                    guard let lowered = SampleWords.folded(folded[index]) else { return nil }
                    folded[index] = lowered
                }
                var any = SIMD4<UInt64>(repeating: 0)
                var index = firstIndex(notBefore: folded)
                while index < rows.count, holds(index, folded, prefix: prefix) {
                    any |= rows[index]
                    if !prefix { break }
                    index += 1
                }
                all &= any
            }
            return (0..<4).reduce(0) { $0 + all[$1].nonzeroBitCount }
        }

        private func token(_ index: Int) -> ArraySlice<UInt8> { bytes[starts[index]..<starts[index + 1]] }

        /// The first token not ordered before `word`.
        private func firstIndex(notBefore word: [UInt8]) -> Int {
            var low = 0, high = rows.count
            while low < high {
                let middle = (low + high) / 2
                if token(middle).lexicographicallyPrecedes(word) { low = middle + 1 } else { high = middle }
            }
            return low
        }

        /// Whether token `index` is `word`, or begins with it when `prefix`.
        private func holds(_ index: Int, _ word: [UInt8], prefix: Bool) -> Bool {
            let token = token(index)
            return prefix ? token.starts(with: word) : token.elementsEqual(word)
        }
    }

    /// The most different words kept: rows with more (long texts of distinct words) are
    /// counted by the index instead. About 50 bytes each.
    static let maxTokens = 16_384
    /// How long words read at one version serve later ones.
    static let lifetime: UInt64 = 1_000_000_000

    /// The words last read, the database version they were read at (``SQLDialect/writeVersion``)
    /// and when (uptime, nanoseconds), no words when the rows could not give them; and
    /// whether a search is reading them again.
    private let state = Mutex<(kept: (version: Int64, at: UInt64, words: Words?)?, reading: Bool)>((nil, false))
    /// The newest rows' searched columns.
    private let sql: String

    /// The words of the newest `rows` rows (at most 256, the bits of a mask) of `table`'s `columns`.
    init(table: String, columns: [String], rows: Int) {
        sql = "SELECT \(columns.joined(separator: ", ")) FROM \(table) ORDER BY pk DESC LIMIT \(min(rows, 256))"
    }

    /// The words as of `version` in `db`: read there when those kept are older and the
    /// database has changed since, by one search at a time (the others meanwhile take
    /// those kept, or none, and the index counts); `nil` when the rows' text is not all
    /// ASCII, or holds too many different words.
    func words(_ db: any SQLConnection, version: Int64) throws -> Words? {
        let now = DispatchTime.now().uptimeNanoseconds
        let (kept, reads) = state.withLock { state -> ((version: Int64, at: UInt64, words: Words?)?, Bool) in
            // (Another thread may have kept words read after this one took `now`.)
            if let kept = state.kept, kept.version == version || now < kept.at || now - kept.at < Self.lifetime { return (kept, false) }
            if state.reading { return (state.kept, false) }
            state.reading = true
            return (nil, true)
        }
        guard reads else { return kept?.words }
        defer { state.withLock { $0.reading = false } }
        let words = try read(db)
        state.withLock { state in
            // Never over words read at a later version (by a snapshot begun after this one).
            if let kept = state.kept, kept.version > version { return }
            state.kept = (version, now, words)
        }
        return words
    }

    /// Reads and splits the rows' text.
    private func read(_ db: any SQLConnection) throws -> Words? {
        var masks: [[UInt8]: SIMD4<UInt64>] = [:]
        let rows = try db.query(sql, [])
        var row = 0
        while try rows.step() {
            var bit = SIMD4<UInt64>(repeating: 0)
            bit[row / 64] = 1 << UInt64(row % 64)
            for column in 0..<rows.columnCount {
                let text = rows.text(column)
                var start = 0
                while start < text.count {
                    guard text[start] < 0x80 else { return nil }
                    guard Self.folded(text[start]) != nil else {
                        start += 1
                        continue
                    }
                    var end = start
                    var token: [UInt8] = []
                    while end < text.count, let folded = Self.folded(text[end]) {
                        token.append(folded)
                        end += 1
                    }
                    masks[token, default: SIMD4(repeating: 0)] |= bit
                    guard masks.count <= Self.maxTokens else { return nil }
                    start = end
                }
            }
            row += 1
        }
        let sorted = masks.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        var bytes: [UInt8] = []
        var starts = [0]
        for (token, _) in sorted {
            bytes += token
            starts.append(bytes.count)
        }
        return Words(bytes: bytes, starts: starts, rows: sorted.map(\.value))
    }

    /// An ASCII letter or digit, in lower case; `nil` for any other byte.
    static func folded(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"): byte
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte + 32
        default: nil
        }
    }
}
