import CatalogSchema
import Foundation
import Synchronization

/// Renditions (and originals fetched from the media store) kept on local disk within a
/// byte budget, the least recently used removed first, with the most recently used small
/// ones also held in memory within a budget of their own. It is a cache: a file lost is
/// made again, so files are renamed into place but never `fsync`ed. Keys are
/// `{sha256}/{rendition name}`; what it holds survives a restart (the directory is read
/// again at start).
package final class RenditionCache: Sendable {
    private struct Entry {
        var size: Int
        var used: UInt64
        var bytes: [UInt8]?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var clock: UInt64 = 0
        var diskBytes = 0
        var memoryBytes = 0
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
            for file in found.sorted(by: { $0.used < $1.used }) {
                state.clock += 1
                state.entries[file.key] = Entry(size: file.size, used: state.clock, bytes: nil)
                state.diskBytes += file.size
            }
        }
        evict()
    }

    /// Bytes on disk and in memory now.
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
            guard var entry = state.entries[key], let bytes = entry.bytes else { return nil }
            state.clock += 1
            entry.used = state.clock
            state.entries[key] = entry
            return bytes
        }
    }

    /// The bytes under `key`, or `nil`; a hit counts as a use. A hit on disk only reads its
    /// file (a small one is then held in memory).
    package func get(_ key: String) -> [UInt8]? {
        let held: [UInt8]?? = state.withLock { state in
            guard var entry = state.entries[key] else { return .none }
            state.clock += 1
            entry.used = state.clock
            state.entries[key] = entry
            return .some(entry.bytes)
        }
        guard case let .some(inMemory) = held else { return nil }
        if let inMemory { return inMemory }
        guard let bytes = try? LocalMediaStore(root: directory).get(fileName(key), limit: Int.max) else {
            // Removed behind the cache's back: forgotten.
            state.withLock { state in
                if let entry = state.entries.removeValue(forKey: key) {
                    state.diskBytes -= entry.size
                    state.memoryBytes -= entry.bytes?.count ?? 0
                }
            }
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
            state.clock += 1
            if let old = state.entries[key] {
                state.diskBytes -= old.size
                state.memoryBytes -= old.bytes?.count ?? 0
            }
            state.entries[key] = Entry(size: bytes.count, used: state.clock, bytes: nil)
            state.diskBytes += bytes.count
        }
        hold(key, bytes)
        evict()
    }

    /// The images the cache holds renditions of (the hashes of its keys).
    package func hashes() -> [String] {
        Array(Set(state.withLock { $0.entries.keys.map { String($0.prefix(64)) } }))
    }

    /// Forgets every rendition of the image `hash`, on disk and in memory.
    package func remove(hash: String) {
        let removed: [String] = state.withLock { state in
            let keys = state.entries.keys.filter { $0.hasPrefix(hash + "/") }
            for key in keys {
                if let entry = state.entries.removeValue(forKey: key) {
                    state.diskBytes -= entry.size
                    state.memoryBytes -= entry.bytes?.count ?? 0
                }
            }
            return keys
        }
        for key in removed { unlink(directory.appendingPathComponent(fileName(key)).path) }
    }

    /// Holds `bytes` in memory when they are small and the entry still exists.
    private func hold(_ key: String, _ bytes: [UInt8]) {
        guard bytes.count <= Self.largestInMemory else { return }
        state.withLock { state in
            guard var entry = state.entries[key], entry.bytes == nil else { return }
            entry.bytes = bytes
            state.entries[key] = entry
            state.memoryBytes += bytes.count
        }
        evict()
    }

    /// Removes the least recently used files (and drops bytes from memory) down to nine
    /// tenths of each budget, once over it.
    private func evict() {
        let doomed: [String] = state.withLock { state in
            // Each budget, once passed, is brought down alone: a full memory drops no file.
            let diskFull = state.diskBytes > diskBudget, memoryFull = state.memoryBytes > memoryBudget
            guard diskFull || memoryFull else { return [] }
            var doomed: [String] = []
            for (key, entry) in state.entries.sorted(by: { $0.value.used < $1.value.used }) {
                let overDisk = diskFull && state.diskBytes > diskBudget / 10 * 9
                let overMemory = memoryFull && state.memoryBytes > memoryBudget / 10 * 9
                guard overDisk || overMemory else { break }
                if overDisk {
                    state.entries[key] = nil
                    state.diskBytes -= entry.size
                    state.memoryBytes -= entry.bytes?.count ?? 0
                    doomed.append(key)
                } else if let bytes = entry.bytes {
                    state.entries[key]?.bytes = nil
                    state.memoryBytes -= bytes.count
                }
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
