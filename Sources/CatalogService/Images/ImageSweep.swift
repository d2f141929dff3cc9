import CatalogMedia
import CatalogSchema
import CatalogStore
import Foundation
import Logging

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

    /// Sweeps every `interval` until the process ends, on a thread Dispatch lends for the
    /// sweep (no thread waits in between).
    func start(every interval: Duration) {
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .seconds(Int(interval.components.seconds))) { [self] in
            do { try run() } catch { logger.warning("The image sweep failed: \(error)") }
            start(every: interval)
        }
    }

    /// One sweep, blocking: what it removed. Unreferenced images page by page (oldest
    /// first), then originals in the store without a record, then renditions this server
    /// still caches of images no longer recorded (removed through another replica).
    @discardableResult
    func run() throws -> (unreferenced: Int, orphans: Int) {
        let cutoff = Int64(Date().timeIntervalSince1970 * 1000) - grace.components.seconds * 1000
        var removed = 0
        var position: (touched: Int64, hash: String)?
        while true {
            let page = try records.unreferenced(before: cutoff, after: position)
            for candidate in page where try remove(candidate.hash, before: cutoff) { removed += 1 }
            guard page.count == 500, let last = page.last else { break }
            position = last
        }
        let stored = try library.store.list(prefix: MediaKey.originals).filter { $0.modified < cutoff }
            .map { String($0.key.dropFirst(MediaKey.originals.count)) }.filter { ImageMember.isHash($0) }
        var orphans = 0
        for hash in try unrecorded(stored) where try remove(hash, before: cutoff) { orphans += 1 }
        for hash in try unrecorded(library.cache.hashes()) { library.cache.remove(hash: hash) }
        if removed > 0 || orphans > 0 {
            logger.info("The image sweep removed \(removed) images nothing shows and \(orphans) without a record.")
        }
        return (removed, orphans)
    }

    /// Those of `hashes` without a record, asked 500 at a time.
    private func unrecorded(_ hashes: [String]) throws -> [String] {
        var found: [String] = []
        for start in stride(from: 0, to: hashes.count, by: 500) {
            let slice = Array(hashes[start..<min(start + 500, hashes.count)])
            let recorded = try records.recorded(slice)
            found += slice.filter { !recorded.contains($0) }
        }
        return found
    }

    /// Removes the images `hashes` now, blocking, if nothing shows them (an account's avatar
    /// once the account is gone: its deletion made them due). Failures are logged; the next
    /// sweep tries again.
    func removeNow(_ hashes: [String]) {
        for hash in hashes {
            do { _ = try remove(hash, before: 1) } catch { logger.warning("Could not remove image \(hash): \(error)") }
        }
    }

    /// Claims the image `hash` (shown by nothing and untouched since `cutoff`, or without a
    /// record), removes its bytes and cached renditions, and drops its record; whether it did.
    private func remove(_ hash: String, before cutoff: Int64) throws -> Bool {
        guard try records.claim(hash, before: cutoff) else { return false }
        library.cache.remove(hash: hash)
        try library.store.delete(MediaKey.original(hash))
        try records.drop(hash)
        return true
    }
}
