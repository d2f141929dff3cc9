import Synchronization

/// List pages of a resource whose renderings are cached (``RenderCache``), kept as what
/// makes them: their items' ids and versions and their next cursor, for the database
/// generation they were read in (``SQLDatabase/generation()``). While the generation
/// stays the same nothing has committed, so the same request would select the same rows
/// in the same order: a hit is the page written again from the render cache, with no
/// query. A page whose item the render cache no longer holds is read again.
///
/// Holds no JSON of its own (the render cache holds that, within its own bounds), so a
/// page costs some 45 bytes an item. Bounded in pages and in bytes: when either is full
/// it starts over. Keyed by the whole request: order, filters, cursor, limit, fields and
/// viewer.
final class PageCache: Sendable {
    /// What a page is made of.
    struct Page: Sendable {
        /// Each item's key in the render cache, in order: the id's length (one byte), the
        /// id, then its version and revision (eight bytes each). One buffer, not one per field.
        private(set) var items: [UInt8] = []
        /// The next page's cursor; `nil` on the last page.
        var nextCursor: String?
        /// False once an item could not be recorded (an id longer than 255 bytes): such a page is not kept.
        private(set) var isComplete = true

        /// Adds the item `id` at `version` and `revision`, the next on the page.
        mutating func append(id: UnsafeBufferPointer<UInt8>, version: Int64, revision: Int64) {
            guard id.count <= Int(UInt8.max) else { return isComplete = false }
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

    private struct Entry {
        let generation: UInt64
        let page: Page
    }

    private struct Entries {
        var byRequest: [ListRequest: Entry] = [:]
        var bytes = 0
    }

    private let entries = Mutex(Entries())
    private let capacity: Int
    private let maxBytes: Int

    /// A cache of at most `capacity` pages taking at most `maxBytes`.
    init(capacity: Int = 4_096, maxBytes: Int = 1 << 20) {
        self.capacity = capacity
        self.maxBytes = maxBytes
    }

    /// The page `request` made in `generation`, if kept.
    func page(_ request: ListRequest, generation: UInt64) -> Page? {
        entries.withLock { entries in
            guard let entry = entries.byRequest[request], entry.generation == generation else { return nil }
            return entry.page
        }
    }

    /// Keeps `page`, made for `request` from a snapshot begun after the database was in
    /// `generation`. Pages of an earlier generation stay until replaced or the cache starts over.
    func store(_ request: ListRequest, _ page: Page, generation: UInt64) {
        let bytes = Self.bytes(request, page)
        entries.withLock { entries in
            if entries.byRequest.count >= capacity || entries.bytes + bytes > maxBytes {
                entries.byRequest.removeAll(keepingCapacity: true)
                entries.bytes = 0
            }
            if let old = entries.byRequest.updateValue(Entry(generation: generation, page: page), forKey: request) {
                entries.bytes -= Self.bytes(request, old.page)
            }
            entries.bytes += bytes
        }
    }

    /// What an entry takes, roughly: its request's text, the page's arrays and cursor, and their overheads.
    private static func bytes(_ request: ListRequest, _ page: Page) -> Int {
        256 + (request.cursor?.utf8.count ?? 0) + (request.search?.utf8.count ?? 0)
            + page.items.count + (page.nextCursor?.utf8.count ?? 0)
    }
}
