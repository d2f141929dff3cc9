import CatalogSchema
import Foundation
import Synchronization

/// Renditions (and originals fetched from the media store) kept on local disk within a
/// byte budget, the least recently used removed first, with the most recently used small
/// ones also held in memory within a budget of their own. It is a cache: a file lost is
/// made again, so files are renamed into place but never `fsync`ed. Keys are
/// `{sha256}/{rendition name}`; what it holds survives a restart (the directory is read
/// again at start). Every operation under its lock is O(1) (``RecencyList``, an index by
/// image), whatever it holds: event loops take that lock for each image they serve.
package final class RenditionCache: Sendable {
    private struct Entry {
        var size: Int
        var bytes: [UInt8]?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Every entry, by recency of use.
        var onDisk = RecencyList()
        /// The entries whose bytes are in memory, by recency of use.
        var inMemory = RecencyList()
        /// The keys of each image's renditions, by its hash.
        var byImage: [String: Set<String>] = [:]
        var diskBytes = 0
        var memoryBytes = 0

        /// A use of `key`, which exists.
        mutating func use(_ key: String, inMemory held: Bool) {
            onDisk.touch(key)
            if held { inMemory.touch(key) }
        }

        /// A new entry of `size` bytes on disk, the most recently used.
        mutating func add(_ key: String, size: Int) {
            entries[key] = Entry(size: size, bytes: nil)
            onDisk.touch(key)
            diskBytes += size
            byImage[String(key.prefix(64)), default: []].insert(key)
        }

        /// Forgets `key`; its entry, if it had one.
        @discardableResult
        mutating func forget(_ key: String) -> Entry? {
            guard let entry = entries.removeValue(forKey: key) else { return nil }
            onDisk.remove(key)
            inMemory.remove(key)
            diskBytes -= entry.size
            memoryBytes -= entry.bytes?.count ?? 0
            let image = String(key.prefix(64))
            byImage[image]?.remove(key)
            if byImage[image]?.isEmpty == true { byImage[image] = nil }
            return entry
        }
    }

    /// The largest rendition held in memory.
    static let largestInMemory = 1 << 20

    private let directory: URL
    private let diskBudget: Int
    private let memoryBudget: Int
    private let state = Mutex(State())

    /// The cache in `directory` (made when missing, its files counted), holding at most
    /// `diskBudget` bytes on disk and `memoryBudget` in memory.
    package init(directory: String, diskBudget: Int, memoryBudget: Int) throws(MediaStoreError) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        self.diskBudget = diskBudget
        self.memoryBudget = memoryBudget
        do {
            try FileManager.default.createDirectory(at: self.directory.appendingPathComponent(".incoming"), withIntermediateDirectories: true)
        } catch {
            throw MediaStoreError("Cannot create the image cache \(directory): \(error.localizedDescription)")
        }
        // What an earlier run left, oldest use first.
        var found: [(key: String, size: Int, used: Int)] = []
        let manager = FileManager.default
        for shard in (try? manager.contentsOfDirectory(atPath: directory)) ?? [] where shard.utf8.count == 2 {
            let shardPath = self.directory.appendingPathComponent(shard).path
            for name in (try? manager.contentsOfDirectory(atPath: shardPath)) ?? [] {
                var status = stat()
                guard stat(shardPath + "/" + name, &status) == 0, let key = Self.key(fileName: name) else { continue }
                found.append((key, Int(status.st_size), Int(status.st_mtim.tv_sec)))
            }
        }
        state.withLock { state in
            for file in found.sorted(by: { $0.used < $1.used }) { state.add(file.key, size: file.size) }
        }
        evict()
    }

    /// Bytes on disk and in memory now, and how many renditions.
    package var usage: (disk: Int, memory: Int, entries: Int) {
        state.withLock { ($0.diskBytes, $0.memoryBytes, $0.entries.count) }
    }

    /// Whether the cache holds `key`, on disk or in memory (no disk is read).
    package func contains(_ key: String) -> Bool {
        state.withLock { $0.entries[key] != nil }
    }

    /// The bytes under `key` when memory holds them (no disk is read): a hit counts as a use.
    package func cached(_ key: String) -> [UInt8]? {
        state.withLock { state in
            guard let bytes = state.entries[key]?.bytes else { return nil }
            state.use(key, inMemory: true)
            return bytes
        }
    }

    /// The bytes under `key`, or `nil`; a hit counts as a use. A hit on disk only reads its
    /// file (a small one is then held in memory).
    package func get(_ key: String) -> [UInt8]? {
        let held: [UInt8]?? = state.withLock { state in
            guard let entry = state.entries[key] else { return .none }
            state.use(key, inMemory: entry.bytes != nil)
            return .some(entry.bytes)
        }
        guard case let .some(inMemory) = held else { return nil }
        if let inMemory { return inMemory }
        guard let bytes = try? LocalMediaStore(root: directory).get(fileName(key), limit: Int.max) else {
            // Removed behind the cache's back: forgotten.
            state.withLock { _ = $0.forget(key) }
            return nil
        }
        hold(key, bytes)
        return bytes
    }

    /// Keeps `bytes` under `key`.
    package func put(_ key: String, _ bytes: [UInt8]) {
        let name = fileName(key)
        let temporary = directory.appendingPathComponent(".incoming/" + UUID().uuidString).path
        let target = directory.appendingPathComponent(name)
        do {
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: temporary, contents: Data(bytes)), rename(temporary, target.path) == 0 else {
                unlink(temporary)
                return
            }
        } catch {
            return
        }
        state.withLock { state in
            state.forget(key)
            state.add(key, size: bytes.count)
        }
        hold(key, bytes)
        evict()
    }

    /// The images the cache holds renditions of (the hashes of its keys).
    package func hashes() -> [String] {
        state.withLock { Array($0.byImage.keys) }
    }

    /// Forgets every rendition of the image `hash`, on disk and in memory.
    package func remove(hash: String) {
        let removed: [String] = state.withLock { state in
            let keys = Array(state.byImage[hash] ?? [])
            for key in keys { state.forget(key) }
            return keys
        }
        for key in removed { unlink(directory.appendingPathComponent(fileName(key)).path) }
    }

    /// Holds `bytes` in memory when they are small and the entry still exists.
    private func hold(_ key: String, _ bytes: [UInt8]) {
        guard bytes.count <= Self.largestInMemory else { return }
        state.withLock { state in
            guard state.entries[key]?.bytes == nil, state.entries[key] != nil else { return }
            state.entries[key]?.bytes = bytes
            state.inMemory.touch(key)
            state.memoryBytes += bytes.count
        }
        evict()
    }

    /// Removes the least recently used files until the disk budget holds, and drops the
    /// least recently used bytes from memory until its budget holds (a full memory drops
    /// no file).
    private func evict() {
        let doomed: [String] = state.withLock { state in
            var doomed: [String] = []
            while state.diskBytes > diskBudget, let oldest = state.onDisk.oldest {
                state.forget(oldest)
                doomed.append(oldest)
            }
            while state.memoryBytes > memoryBudget, let oldest = state.inMemory.oldest {
                state.inMemory.remove(oldest)
                state.memoryBytes -= state.entries[oldest]?.bytes?.count ?? 0
                state.entries[oldest]?.bytes = nil
            }
            return doomed
        }
        for key in doomed { unlink(directory.appendingPathComponent(fileName(key)).path) }
    }

    /// `{hash}/{name}` → `ab/{hash}-{name}`.
    private func fileName(_ key: String) -> String {
        String(key.prefix(2)) + "/" + key.replacingOccurrences(of: "/", with: "-")
    }

    /// The key of a file `name` (`{hash}-{rendition}`), or `nil` for a file the cache did not write.
    private static func key(fileName name: String) -> String? {
        let hash = name.prefix(64)
        guard ImageMember.isHash(hash), name.dropFirst(64).first == "-", name.count > 65 else { return nil }
        return hash + "/" + name.dropFirst(65)
    }
}

/// Keys in order of use, least recent first, each use, insertion and removal O(1): a
/// doubly linked list threaded through a dictionary of each key's neighbours.
struct RecencyList {
    private struct Links {
        var older: String?
        var newer: String?
    }

    private var links: [String: Links] = [:]
    /// The least recently used key.
    private(set) var oldest: String?
    private var newest: String?

    var count: Int { links.count }

    /// Makes `key` the most recently used (adding it when absent).
    mutating func touch(_ key: String) {
        if newest == key { return }
        remove(key)
        links[key] = Links(older: newest, newer: nil)
        if let newest { links[newest]?.newer = key }
        newest = key
        if oldest == nil { oldest = key }
    }

    /// Removes `key` (nothing when absent).
    mutating func remove(_ key: String) {
        guard let link = links.removeValue(forKey: key) else { return }
        if let older = link.older { links[older]?.newer = link.newer } else { oldest = link.newer }
        if let newer = link.newer { links[newer]?.older = link.older } else { newest = link.older }
    }
}
