import CatalogMedia
import CatalogSchema
import CatalogStore
import Foundation
import Logging
import Synchronization

/// Removes what no resource shows any more, once a grace period has passed since it last
/// was (a replaced artwork, a deleted item's poster: clients holding older documents keep
/// their URLs that long, and backups their images), and originals in the media store
/// without a record (an upload whose write never committed: a crash between the two leaves
/// such an orphan, never a reference to nothing).
final class ImageSweep: Sendable {
    let records: ImageRecords
    let library: ImageLibrary
    /// How long an image stays once nothing shows it (or since its upload, for one never shown).
    let grace: Duration
    private let logger = Logger(label: "catalog.images")

    init(records: ImageRecords, library: ImageLibrary, grace: Duration) {
        self.records = records
        self.library = library
        self.grace = grace
    }

    /// Sweeps every `interval` on a thread of its own, until the process ends.
    func start(every interval: Duration) {
        let thread = Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: Double(interval.components.seconds))
                do { try run() } catch { logger.warning("The image sweep failed: \(error)") }
            }
        }
        thread.name = "image-sweep"
        thread.start()
    }

    /// One sweep, blocking: what it removed.
    @discardableResult
    func run() throws -> (unreferenced: Int, orphans: Int) {
        let cutoff = Int64(Date().timeIntervalSince1970 * 1000) - grace.components.seconds * 1000
        var forgotten: [String] = []
        while true {
            let candidates = try records.unreferenced(before: cutoff)
            var batch: [String] = []
            for hash in candidates where try forget(hash, before: cutoff) { batch.append(hash) }
            forgotten += batch
            // A candidate referenced again is skipped: stop once a pass forgets nothing.
            if batch.isEmpty || candidates.count < 1000 { break }
        }
        for hash in forgotten { library.cache.remove(hash: hash) }
        let stored = try library.store.list(prefix: MediaKey.originals).filter { $0.modified < cutoff }
            .map { String($0.key.dropFirst(MediaKey.originals.count)) }.filter { ImageMember.isHash($0) }
        var orphans: [String] = []
        for start in stride(from: 0, to: stored.count, by: 500) {
            let slice = Array(stored[start..<min(start + 500, stored.count)])
            let recorded = try records.recorded(slice)
            orphans += slice.filter { !recorded.contains($0) }
        }
        remove(orphans)
        if !forgotten.isEmpty || !orphans.isEmpty {
            logger.info("The image sweep removed \(forgotten.count) unreferenced images and \(orphans.count) without a record.")
        }
        return (forgotten.count, orphans.count)
    }

    private func forget(_ hash: String, before cutoff: Int64) throws -> Bool {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<Bool, any Error>>(.success(false))
        let store = library.store
        records.forget(hash, before: cutoff, removing: { try store.delete(MediaKey.original(hash)) }) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0 }.get()
    }

    private func remove(_ hashes: [String]) {
        for hash in hashes {
            library.cache.remove(hash: hash)
            do { try library.store.delete(MediaKey.original(hash)) } catch { logger.warning("Could not remove image \(hash): \(error)") }
        }
    }
}
