import Foundation
import Synchronization

/// List pages of a resource whose renderings are cached (``RenderCache``), kept as what
/// makes them: their items' ids and versions and their next cursor, for the database
/// generation they were read in (``SQLDatabase/generation()``). While the generation
/// stays the same nothing has committed, so the same request would select the same rows
/// in the same order: a hit is the page written again from the render cache, with no
/// query. A page whose item the render cache no longer holds is read again. (On
/// PostgreSQL, a generation is a database snapshot, ``generation(ofSnapshot:)``, and a
/// page is served only once PostgreSQL has said it is still at that snapshot.)
///
/// A page costs some 53 bytes an item (a 36-byte id, its length, version and revision):
/// the render cache holds the JSON, within its own bounds. The first pages kept in a
/// generation also keep their whole JSON, up to ``maxJSONBytes`` in all, and are served
/// as kept (writing a 20-item page again from the render cache costs 26,000
/// instructions); once that budget is spent, pages keep their items only, so that a list
/// read page by page at random is still all kept. Only the newest generation's pages are
/// kept (older ones can never be served again). Bounded in pages and in bytes: when
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

    /// What a page is made of.
    struct Page: Sendable {
        /// Each item's key in the render cache, in order: the id's length (one byte), the
        /// id, then its version and revision (eight bytes each). One buffer, not one per field.
        private(set) var items: [UInt8] = []
        /// The next page's cursor; `nil` on the last page.
        var nextCursor: String?
        /// The digest of the page's JSON (its weak tag), made once when the page is kept.
        var digest: UInt64 = 0
        /// The page's JSON, while the cache's budget for JSON lasts (``store(_:_:generation:)`` decides).
        var json: [UInt8]?
        /// False once an item is missing: one the render cache could not keep (it could
        /// never be written again from there), or an id longer than 255 bytes. Such a page is not kept.
        private(set) var isComplete = true

        /// Adds the item `id` at `version` and `revision`, the next on the page, which the
        /// render cache holds when `held`.
        mutating func append(id: UnsafeBufferPointer<UInt8>, version: Int64, revision: Int64, held: Bool = true) {
            guard held, id.count <= Int(UInt8.max) else {
                isComplete = false
                return
            }
            items.append(UInt8(id.count))
            items.append(contentsOf: id)
            withUnsafeBytes(of: version.littleEndian) { items.append(contentsOf: $0) }
            withUnsafeBytes(of: revision.littleEndian) { items.append(contentsOf: $0) }
        }

        /// Calls `body` with each item's id, version and revision, in order, while it returns true.
        /// - Returns: whether `body` returned true for every item.
        func forEachItem(_ body: (_ id: UnsafeBufferPointer<UInt8>, _ version: Int64, _ revision: Int64) -> Bool) -> Bool {
            items.withUnsafeBufferPointer { items in
                let raw = UnsafeRawBufferPointer(items)
                var offset = 0
                while offset < items.count {
                    let idCount = Int(items[offset])
                    let id = UnsafeBufferPointer(rebasing: items[(offset + 1)..<(offset + 1 + idCount)])
                    offset += 1 + idCount
                    let version = Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int64.self))
                    let revision = Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: Int64.self))
                    offset += 16
                    guard body(id, version, revision) else { return false }
                }
                return true
            }
        }
    }

    private struct Entries {
        var byKey: [Key: Page] = [:]
        var bytes = 0
        /// What the pages' JSON takes.
        var jsonBytes = 0
        /// The generation of every page held.
        var generation: UInt64 = 0
    }

    private let entries = Mutex(Entries())
    /// The newest database snapshot a page was read in, as PostgreSQL writes it, and the
    /// generation it was given (``generation(ofSnapshot:)``).
    private let snapshots = Mutex<(snapshot: Snapshot?, generation: UInt64)>((nil, 0))
    /// Pages answered as kept because the database was still at their snapshot.
    let unchanged = Atomic<Int>(0)
    private let capacity: Int
    private let maxBytes: Int
    /// The most bytes of JSON kept with pages.
    private let maxJSONBytes: Int

    /// A cache of at most `capacity` pages taking at most `maxBytes`, and `maxJSONBytes`
    /// more of whole pages' JSON.
    init(capacity: Int = 4_096, maxBytes: Int = 1 << 20, maxJSONBytes: Int = 2 << 20) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.maxJSONBytes = maxJSONBytes
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
        var page = page
        entries.withLock { entries in
            if generation != entries.generation {
                guard generation > entries.generation else { return }
                entries.byKey.removeAll(keepingCapacity: true)
                entries.bytes = 0
                entries.jsonBytes = 0
                entries.generation = generation
            }
            let old = entries.byKey[key]
            if old == nil && (entries.byKey.count >= capacity || entries.bytes + bytes > maxBytes) {
                entries.byKey.removeAll(keepingCapacity: true)
                entries.bytes = 0
                entries.jsonBytes = 0
            }
            let oldJSON = old?.json?.count ?? 0
            if let json = page.json, entries.jsonBytes - oldJSON + json.count > maxJSONBytes { page.json = nil }
            entries.byKey[key] = page
            entries.bytes += bytes - (old.map { Self.bytes(key, $0) } ?? 0)
            entries.jsonBytes += (page.json?.count ?? 0) - oldJSON
        }
    }

    /// Where the database names its snapshots rather than counting its commits
    /// (PostgreSQL, ``SQLDialect/unlessUnchanged(_:)``): the generation of the pages read
    /// in `snapshot`. The newest snapshot's when it is that one; the next generation when
    /// it is newer (``Snapshot/isNewer(than:)``), and it becomes the newest; `nil` when it
    /// is older (read before the newest: its page is not kept). So a generation is only
    /// ever one snapshot's, and every page kept in it was read there.
    func generation(ofSnapshot snapshot: UnsafeBufferPointer<UInt8>) -> UInt64? {
        guard let seen = Snapshot(snapshot) else { return nil }
        return snapshots.withLock { newest -> UInt64? in
            if let current = newest.snapshot {
                if current.text.utf8.elementsEqual(snapshot) { return newest.generation }
                guard seen.isNewer(than: current) else { return nil }
            }
            newest = (seen, newest.generation + 1)
            return newest.generation
        }
    }

    /// The newest snapshot pages were read in, and its generation (`nil` before any).
    var newestSnapshot: (text: String, generation: UInt64)? {
        snapshots.withLock { newest in newest.snapshot.map { ($0.text, newest.generation) } }
    }

    /// A PostgreSQL snapshot as ``SQLDialect/unlessUnchanged(_:)`` names it:
    /// `xmin:xmax:xip,…` (`pg_current_snapshot()`), a space, and when the server started.
    struct Snapshot {
        let text: String
        /// The first transaction not yet begun when it was taken.
        let xmax: UInt64
        /// How many transactions below `xmax` were running.
        let running: Int
        /// When the server started: snapshots of different runs are not comparable.
        let started: Substring

        /// `nil` when `bytes` is not such a snapshot (a server in recovery names none).
        init?(_ bytes: UnsafeBufferPointer<UInt8>) {
            text = String(decoding: bytes, as: UTF8.self)
            let parts = text.split(separator: " ", maxSplits: 1)
            let fields = parts.first?.split(separator: ":", omittingEmptySubsequences: false) ?? []
            guard parts.count == 2, fields.count == 3, let xmax = UInt64(fields[1]) else { return nil }
            self.xmax = xmax
            running = fields[2].isEmpty ? 0 : fields[2].split(separator: ",").count
            started = parts[1]
        }

        /// Whether it was taken after `other` on the same server run (or on another run):
        /// later snapshots have a higher `xmax`, or the same with fewer transactions still
        /// running (none starts below `xmax`).
        func isNewer(than other: Snapshot) -> Bool {
            guard started == other.started else { return true }
            return xmax != other.xmax ? xmax > other.xmax : running <= other.running
        }
    }

    /// Keeps `page` (complete: ``Page/isComplete``) as written, `json` with `nextCursor`,
    /// for the request `key` read in `generation` (``store(_:_:generation:)``): the page's
    /// digest, made once here.
    func keep(_ key: Key, _ page: Page, json: [UInt8], nextCursor: String?, generation: UInt64) -> UInt64 {
        var page = page
        page.nextCursor = nextCursor
        page.digest = Digest.of(json)
        page.json = json
        store(key, page, generation: generation)
        return page.digest
    }

    /// What an entry takes, roughly: its key, the page's items and cursor, and their overheads.
    private static func bytes(_ key: Key, _ page: Page) -> Int {
        256 + key.bytes.count + page.items.count + (page.nextCursor?.utf8.count ?? 0)
    }
}
