import Foundation
import Synchronization

/// Rendered JSON of resources, keyed by id and validated by version: a resource changes
/// only with a new version, so a hit is exactly what rendering the row would write.
/// Serves the hot embedded and listed playable items (an `include=entries` page writes
/// fifty of them). Bounded in entries and in bytes: when either is full it starts over.
/// Split in shards by id, each with its own share of the bounds and a read-write lock:
/// the threads that read at once (PostgreSQL's pool of sixteen), often the same hot
/// items, never wait for each other to read.
///
/// Two writes can bring an (id, version) pair back with other content: a deletion and an
/// import that re-creates the id. After such a commit, ``invalidate(id:)`` moves the
/// epoch on, and a reader stores only what it rendered from a snapshot taken in the
/// current epoch (it passes the ``currentEpoch`` it saw before its snapshot began), so a
/// rendering of the old row can never be kept. Writers never store: what they render
/// might not commit.
///
/// Another server sharing the database (PostgreSQL) can do the same without this one
/// hearing of it, so there entries are validated by the row's revision too (its `xmin`,
/// new with every write of the row): a rendering is served only for the very row version
/// it was made from.
final class RenderCache: Sendable {
    private struct Entry {
        let version: Int64
        /// The row's revision where the engine has one (PostgreSQL's `xmin`), else 0.
        let revision: Int64
        let id: [UInt8]
        /// The JSON, an array of its own: a whole resource read from the cache is this
        /// array, shared rather than copied (``current(id:generation:)``).
        let json: [UInt8]
        /// One more than the database generation in which a read found this the resource's
        /// current row (``confirm(id:version:revision:generation:)``); 0 before.
        var confirmed: UInt64 = 0

        /// Whether it holds the id `id`.
        func holds(_ id: UnsafeBufferPointer<UInt8>) -> Bool {
            self.id.count == id.count
                && self.id.withUnsafeBufferPointer { stored in
                    guard let base = stored.baseAddress, let other = id.baseAddress else { return id.isEmpty }
                    return memcmp(base, other, id.count) == 0
                }
        }
    }

    private struct Entries {
        var byKey: [UInt64: Entry] = [:]
        /// The bytes of JSON held.
        var bytes = 0
    }

    /// Entries behind a read-write lock (`pthread_rwlock_t`: readers share it).
    private final class Shard: @unchecked Sendable {
        private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        private var entries = Entries()

        init() { pthread_rwlock_init(lock, nil) }

        deinit {
            pthread_rwlock_destroy(lock)
            lock.deallocate()
        }

        func reading<T>(_ body: (borrowing Entries) -> T) -> T {
            pthread_rwlock_rdlock(lock)
            defer { pthread_rwlock_unlock(lock) }
            return body(entries)
        }

        func writing<T>(_ body: (inout Entries) -> T) -> T {
            pthread_rwlock_wrlock(lock)
            defer { pthread_rwlock_unlock(lock) }
            return body(&entries)
        }
    }

    private let shards: [Shard]
    /// The bounds of each shard.
    private let capacity: Int
    private let maxBytes: Int
    private static let epoch = Atomic<UInt64>(0)

    /// The epoch to pass to ``store(id:version:json:epoch:)``, read before the snapshot begins.
    static var currentEpoch: UInt64 { epoch.load(ordering: .acquiring) }

    /// A cache of at most `capacity` entries holding at most `maxBytes` of JSON, in `shards` shards.
    init(capacity: Int = 20_000, maxBytes: Int = 8 << 20, shards: Int = 16) {
        self.shards = (0..<max(1, shards)).map { _ in Shard() }
        self.capacity = capacity / self.shards.count
        self.maxBytes = maxBytes / self.shards.count
    }

    /// The shard holding `key`.
    private func shard(_ key: UInt64) -> Shard {
        shards[Int(truncatingIfNeeded: (key >> 32) % UInt64(shards.count))]
    }

    /// Appends the cached JSON of the resource `id` at `version` and `revision` to
    /// `writer`; false, writing nothing, when it is not cached.
    func write(id: UnsafeBufferPointer<UInt8>, version: Int64, revision: Int64, into writer: inout JSONWriter) -> Bool {
        let key = Self.key(id)
        return shard(key).reading { entries in
            guard let entry = entries.byKey[key], entry.version == version, entry.revision == revision, entry.holds(id) else { return false }
            entry.json.withUnsafeBufferPointer { writer.raw($0) }
            return true
        }
    }

    /// The cached JSON of the resource `id` and its version, when a read in database
    /// `generation` found it current (nothing has committed since, so it still is); `nil` otherwise.
    func current(id: UnsafeBufferPointer<UInt8>, generation: UInt64) -> (version: Int64, json: [UInt8])? {
        let key = Self.key(id)
        return shard(key).reading { entries in
            guard let entry = entries.byKey[key], entry.confirmed == generation &+ 1, entry.holds(id) else { return nil }
            return (entry.version, entry.json)
        }
    }

    /// Records that a read begun in database `generation` found the resource `id` at
    /// `version` and `revision`, as this cache holds it (if it does).
    func confirm(id: UnsafeBufferPointer<UInt8>, version: Int64, revision: Int64, generation: UInt64) {
        let key = Self.key(id)
        shard(key).writing { entries in
            guard let entry = entries.byKey[key], entry.version == version, entry.revision == revision, entry.holds(id) else { return }
            entries.byKey[key]?.confirmed = generation &+ 1
        }
    }

    /// Remembers the JSON of the resource `id` at `version`, read from a snapshot taken in
    /// `epoch` (and, when `confirmed` is given, as current in that database generation:
    /// ``confirm(id:version:revision:generation:)``); nothing when an invalidation came
    /// since, or when the JSON alone would take more than 1/64 of its shard's byte budget.
    /// - Returns: whether it is kept.
    @discardableResult
    func store(
        id: UnsafeBufferPointer<UInt8>, version: Int64, revision: Int64, json: UnsafeBufferPointer<UInt8>, epoch: UInt64, confirmed: UInt64? = nil
    ) -> Bool {
        guard json.count <= maxBytes / 64 else { return false }
        let entry = Entry(version: version, revision: revision, id: Array(id), json: Array(json), confirmed: confirmed.map { $0 &+ 1 } ?? 0)
        let key = Self.key(id)
        return shard(key).writing { entries in
            guard Self.epoch.load(ordering: .acquiring) == epoch else { return false }
            if entries.byKey.count >= capacity || entries.bytes + json.count > maxBytes {
                entries.byKey.removeAll(keepingCapacity: true)
                entries.bytes = 0
            }
            if let old = entries.byKey.updateValue(entry, forKey: key) { entries.bytes -= old.json.count }
            entries.bytes += json.count
            return true
        }
    }

    /// Forgets the resource `id` once a deletion or an import of it has committed.
    func invalidate(id: String) {
        Self.epoch.add(1, ordering: .releasing)
        var id = id
        let key = id.withUTF8 { Self.key($0) }
        shard(key).writing { entries in
            if let old = entries.byKey.removeValue(forKey: key) { entries.bytes -= old.json.count }
        }
    }

    /// A hash of the id's bytes, eight at a time.
    private static func key(_ id: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(id.count)
        let raw = UnsafeRawBufferPointer(id)
        var offset = 0
        while offset + 8 <= raw.count {
            hash = (hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x9E37_79B9_7F4A_7C15
            hash ^= hash >> 29
            offset += 8
        }
        while offset < raw.count {
            hash = (hash ^ UInt64(raw[offset])) &* 0x0000_0100_0000_01b3
            offset += 1
        }
        return hash
    }
}
