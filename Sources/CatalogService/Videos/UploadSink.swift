import CatalogIdentity
import CatalogMedia
import HTTPServer
import Synchronization

/// Where one request's upload bytes go as they arrive (``RequestBodySink``). The event
/// loop only copies each read into a queue; a thread of the upload pool writes them to the
/// append's file in order (and lets the storage send whole parts to an object store),
/// counted against what the upload still lacks and hashed when the client sent a
/// checksum. Past ``maxQueued`` bytes waiting, the connection stops reading until the
/// writer catches up, so memory stays bounded whatever the client sends. When the body
/// ends, `ended` runs on the same thread after the last write.
final class UploadSink: RequestBodySink, @unchecked Sendable {
    let append: UploadAppend
    /// The most bytes it takes (what the upload lacks).
    let allowed: Int
    let digest: RunningDigest?
    private let storage: any VideoStorage
    private let responder: Responder
    private let ended: @Sendable (UploadSink, Ending) -> Void

    /// How a body ended.
    enum Ending: Sendable {
        /// All of it arrived.
        case complete
        /// The client went away, was too slow, or sent a malformed chunk.
        case cut
        /// The upload pool could not take the work: nothing of this body is kept.
        case unqueued
    }

    /// The most bytes waiting for the writer before the connection pauses.
    static let maxQueued = 2 << 20
    /// The threads that write uploads' bytes (and send their parts to an object store).
    static let pool = WorkPool(name: "uploads", threads: 4, queueLimit: 4096)
    /// The most bytes one writer job writes before it gives its thread to another upload's.
    static let turn = 8 << 20

    private struct State {
        var chunks: [[UInt8]] = []
        var queuedBytes = 0
        /// Bytes taken in all (the writer's count lags).
        var taken = 0
        /// Whether a writer job runs or is queued.
        var writing = false
        var paused = false
        /// How the body ended, once it has.
        var ending: Ending?
        /// Whether the body was longer than ``allowed`` (so nothing of it is kept).
        var overflowed = false
        /// Why the storage refused a write, if it did.
        var failure: (any Error)?
    }

    private let state = Mutex(State())

    init(
        append: UploadAppend, allowed: Int, checksum: UploadChecksum?, storage: any VideoStorage, responder: Responder,
        ended: @escaping @Sendable (UploadSink, Ending) -> Void
    ) {
        self.append = append
        self.allowed = allowed
        digest = checksum.map { RunningDigest($0.algorithm) }
        self.storage = storage
        self.responder = responder
        self.ended = ended
    }

    /// Whether the body was longer than the upload lacks (read after the end).
    var overflowed: Bool { state.withLock { $0.overflowed } }
    /// Why the storage refused the bytes, if it did (read after the end).
    var failure: (any Error)? { state.withLock { $0.failure } }

    func receive(_ bytes: UnsafeRawBufferPointer) -> BodyIntake {
        let chunk = [UInt8](bytes)
        let (start, intake): (Bool, BodyIntake) = state.withLock { state in
            // Already answered (no thread could take the work): nothing more is read.
            if state.ending == .unqueued { return (false, .refused) }
            guard state.taken + chunk.count <= allowed, state.failure == nil else {
                state.overflowed = state.failure == nil
                state.ending = .complete
                return (startWriter(&state), .refused)
            }
            state.taken += chunk.count
            state.queuedBytes += chunk.count
            state.chunks.append(chunk)
            if state.queuedBytes > Self.maxQueued { state.paused = true }
            return (startWriter(&state), state.paused ? .paused : .taken)
        }
        if start { schedule() }
        return intake
    }

    func end(complete: Bool) {
        let start = state.withLock { state in
            state.ending = complete ? .complete : .cut
            return startWriter(&state)
        }
        if start { schedule() }
    }

    /// Marks the writer running; whether it must be started.
    private func startWriter(_ state: inout State) -> Bool {
        guard !state.writing else { return false }
        state.writing = true
        return true
    }

    private func schedule() {
        guard Self.pool.submit({ [self] in write() }) else {
            // No thread can take it: the body keeps nothing (the upload keeps the offset it reported).
            state.withLock { $0.ending = .unqueued }
            ended(self, .unqueued)
            return
        }
    }

    /// Writes what waits, in order, and gives the thread back after ``turn`` bytes (the
    /// rest is another job, behind the other uploads'); after the body's end, hands the
    /// sink to `ended` on the blocking pool (a commit waits on the disk or the object store).
    private func write() {
        var written = 0
        while true {
            guard written < Self.turn else { return schedule() }
            let next: (chunk: [UInt8]?, ending: Ending?) = state.withLock { state in
                if !state.chunks.isEmpty { return (state.chunks.removeFirst(), nil) }
                state.writing = false
                return (nil, state.ending)
            }
            guard let chunk = next.chunk else {
                if let ending = next.ending, !Handler.runBlocking({ [self] in ended(self, ending) }) { ended(self, .unqueued) }
                return
            }
            written += chunk.count
            var failure: (any Error)?
            if self.failure == nil {
                let written = chunk.withUnsafeBytes { bytes in
                    digest?.update(bytes)
                    return append.write(bytes)
                }
                if !written {
                    failure = MediaStoreError("The disk refused the bytes.")
                } else {
                    do { try storage.appended(append) } catch { failure = error }
                }
            }
            let resume = state.withLock { state in
                state.queuedBytes -= chunk.count
                if let failure { state.failure = failure }
                guard state.paused, state.queuedBytes <= Self.maxQueued / 2 else { return false }
                state.paused = false
                return true
            }
            if resume { responder.resumeBody() }
        }
    }
}
