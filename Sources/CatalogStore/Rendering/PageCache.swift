import Foundation
import Synchronization

/// List pages of a resource whose renderings are cached (``RenderCache``), kept as
/// answered (their JSON, next cursor and digest) for the database generation they were
/// read in (``SQLDatabase/generation()``). While the generation stays the same nothing
/// has committed, so the same request would select the same rows in the same order and
/// render them the same: a hit is the kept JSON, with no query and nothing written
/// again. (Written again from the render cache, a 20-item page cost 26,000 instructions.)
///
/// Only the newest generation's pages are kept (older ones can never be served again).
/// Bounded in pages and in bytes (a page over an eighth of the bytes is not kept): when
/// either is full it starts over. Keyed by the request's exact bytes (``Key``).
final class PageCache: Sendable {
    /// A list request as exact bytes: limit, fields, order, search text, areas (their
    /// numbers' bit patterns), scope, the viewer where it matters, and cursor, each tagged
    /// or length-prefixed so that no two requests share a key. Not the ``ListRequest``
    /// itself: `String` equality is canonical (a precomposed and a decomposed "é" are
    /// equal) and `-0.0 == 0.0`, but a page, and its cursor, answer to what was sent.
    struct Key: Hashable {
        private(set) var bytes: [UInt8] = []

        /// The key of `request`; `viewer` says whether who lists changes the page (the
        /// resource hides rows from some viewers).
        init(_ request: ListRequest, viewer: Bool) {
            bytes.reserveCapacity(80 + (request.cursor?.utf8.count ?? 0) + (request.search?.utf8.count ?? 0))
            append(UInt64(bitPattern: Int64(request.limit)))
            append(request.fields.bits)
            switch request.order {
            case let .field(name, descending):
                bytes.append(descending ? 1 : 2)
                append(name)
            case .relevance: bytes.append(3)
            case .distance: bytes.append(4)
            }
            append(request.search)
            append(UInt64(request.areas.count))
            for area in request.areas {
                switch area {
                case let .boundingBox(minLongitude, minLatitude, maxLongitude, maxLatitude):
                    bytes.append(5)
                    for value in [minLongitude, minLatitude, maxLongitude, maxLatitude] { append(value.bitPattern) }
                case let .near(latitude, longitude, radius):
                    bytes.append(6)
                    for value in [latitude, longitude, radius] { append(value.bitPattern) }
                }
            }
            append(request.scope.map { "\($0)" })
            append(viewer ? "\(request.viewer)" : nil)
            append(request.cursor)
        }

        /// Hashes the bytes at once (an array of bytes hashes each one on its own).
        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.bytes.count == rhs.bytes.count
                && lhs.bytes.withUnsafeBytes { left in
                    rhs.bytes.withUnsafeBytes { right in
                        guard let a = left.baseAddress, let b = right.baseAddress else { return true }
                        return memcmp(a, b, left.count) == 0
                    }
                }
        }

        private mutating func append(_ value: UInt64) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }

        /// Its length (all ones when absent), then its UTF-8.
        private mutating func append(_ text: String?) {
            guard let text else { return append(UInt64.max) }
            append(UInt64(text.utf8.count))
            bytes.append(contentsOf: text.utf8)
        }
    }

    /// A page as answered: its JSON, the next page's cursor (`nil` on the last page) and
    /// the JSON's digest (its weak tag), made once when the page is kept.
    struct Page: Sendable {
        let json: [UInt8]
        let nextCursor: String?
        let digest: UInt64
    }

    private struct Entries {
        var byKey: [Key: Page] = [:]
        var bytes = 0
        /// The generation of every page held.
        var generation: UInt64 = 0
    }

    private let entries = Mutex(Entries())
    private let capacity: Int
    private let maxBytes: Int

    /// A cache of at most `capacity` pages taking at most `maxBytes`.
    init(capacity: Int = 4_096, maxBytes: Int = 4 << 20) {
        self.capacity = capacity
        self.maxBytes = maxBytes
    }

    /// The page of the request `key` made in `generation`, if kept.
    func page(_ key: Key, generation: UInt64) -> Page? {
        entries.withLock { entries in
            entries.generation == generation ? entries.byKey[key] : nil
        }
    }

    /// Keeps `page`, made for the request `key` from a snapshot begun after the database
    /// was in `generation`: unless a later generation's page has been kept since; the
    /// first page of a later generation drops the others.
    func store(_ key: Key, _ page: Page, generation: UInt64) {
        let bytes = Self.bytes(key, page)
        guard bytes <= maxBytes / 8 else { return }
        entries.withLock { entries in
            if generation != entries.generation {
                guard generation > entries.generation else { return }
                entries.byKey.removeAll(keepingCapacity: true)
                entries.bytes = 0
                entries.generation = generation
            }
            let old = entries.byKey[key]
            if old == nil && (entries.byKey.count >= capacity || entries.bytes + bytes > maxBytes) {
                entries.byKey.removeAll(keepingCapacity: true)
                entries.bytes = 0
            }
            entries.byKey[key] = page
            entries.bytes += bytes - (old.map { Self.bytes(key, $0) } ?? 0)
        }
    }

    /// What an entry takes, roughly: its key, the page's JSON and cursor, and their overheads.
    private static func bytes(_ key: Key, _ page: Page) -> Int {
        256 + key.bytes.count + page.json.count + (page.nextCursor?.utf8.count ?? 0)
    }
}
