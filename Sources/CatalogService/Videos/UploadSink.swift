import CatalogIdentity
import CatalogMedia
import HTTPServer

/// Where one request's upload bytes go as they arrive (``RequestBodySink``): written to
/// the append's file on the event loop (the page cache; syncing and the object store come
/// after, off the loop), counted against what the upload still lacks, and hashed when the
/// client sent a checksum. When the body ends, `ended` runs with the sink and how it
/// ended, on the blocking pool.
///
/// Confined: ``receive(_:)`` and ``end(complete:)`` run on the connection's loop, one at a
/// time; `ended` reads the sink only after the last of them.
final class UploadSink: RequestBodySink, @unchecked Sendable {
    let append: UploadAppend
    /// The most bytes it takes (what the upload lacks).
    let allowed: Int
    let digest: RunningDigest?
    /// Whether the body was longer than ``allowed`` (so nothing of it is kept).
    private(set) var overflowed = false
    private let ended: @Sendable (UploadSink, Ending) -> Void

    /// How a body ended.
    enum Ending: Sendable {
        /// All of it arrived (or the sink stopped taking it: ``overflowed``, a failed write).
        case complete
        /// The client went away, was too slow, or sent a malformed chunk.
        case cut
        /// The blocking pool could not take the sink: nothing is kept (this runs on the loop).
        case unqueued
    }

    init(append: UploadAppend, allowed: Int, checksum: UploadChecksum?, ended: @escaping @Sendable (UploadSink, Ending) -> Void) {
        self.append = append
        self.allowed = allowed
        digest = checksum.map { RunningDigest($0.algorithm) }
        self.ended = ended
    }

    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard append.received + bytes.count <= allowed else {
            overflowed = true
            finish(.complete)
            return false
        }
        guard append.write(bytes) else {
            finish(.complete)
            return false
        }
        digest?.update(bytes)
        return true
    }

    func end(complete: Bool) {
        finish(complete ? .complete : .cut)
    }

    /// Hands the sink to `ended` off the loop; when the pool is full, `ended` learns so on
    /// the loop and keeps nothing (the upload keeps the offset it reported).
    private func finish(_ ending: Ending) {
        let queued = Handler.runBlocking { [self] in ended(self, ending) }
        if !queued { ended(self, .unqueued) }
    }
}
