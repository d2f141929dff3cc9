import CatalogMedia
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import Logging
import Synchronization

/// The processing of finished uploads: workers (threads of their own, never an event
/// loop's) claim jobs from the database, each held by a lease the ticker renews while it
/// runs, and run the ``VideoPipeline`` on them: probe, HLS renditions, storyboard, MP4 and
/// poster (through the image pipeline), then the files kept and the item's video shown
/// ready, or failed with the reason. A job whose worker died is taken again once its
/// lease ends, and a job run again writes the same files, replacing what a run before kept.
///
/// The ticker also renews the leases of uploads whose bodies are arriving, ends uploads
/// past their expiry, and removes the files of released videos.
final class VideoProcessor: Sendable {
    let records: VideoRecords
    let storage: any VideoStorage
    let pipeline: VideoPipeline?
    let images: ImageLibrary
    let imageRecords: ImageRecords
    let leases: UploadLeases
    /// The server's absolute URL, for items' stream URLs; `nil` leaves them as they are.
    let publicURL: String?
    /// Where jobs work (a directory on the media's disk, or the spool for S3).
    let scratch: @Sendable (String) throws -> String
    let maxBytes: Int
    let workerCount: Int

    /// How long a job's lease lasts without renewal, and how often leases are renewed.
    static let jobLease: Int64 = 60_000
    static let tick: Duration = .seconds(15)
    private static let logger = Logger(label: "catalog.videos")

    private struct State {
        var stopped = false
        var started = false
        /// The jobs running, by id, with their workers.
        var running: [String: String] = [:]
    }

    private let state = Mutex(State())
    private let signal = DispatchSemaphore(value: 0)
    /// Wakes the ticker early (to stop).
    private let tickerWake = DispatchSemaphore(value: 0)
    /// The workers and the ticker still running.
    private let running = DispatchGroup()

    init(
        records: VideoRecords, storage: any VideoStorage, pipeline: VideoPipeline?, images: ImageLibrary, imageRecords: ImageRecords, leases: UploadLeases,
        publicURL: String?, scratch: @escaping @Sendable (String) throws -> String, maxBytes: Int, workers: Int
    ) {
        self.records = records
        self.storage = storage
        self.pipeline = pipeline
        self.images = images
        self.imageRecords = imageRecords
        self.leases = leases
        self.publicURL = publicURL
        self.scratch = scratch
        self.maxBytes = maxBytes
        workerCount = workers
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    /// Starts the workers and the ticker (whose first round comes a tick after the start).
    func start() {
        if pipeline == nil { Self.logger.warning("ffmpeg or ffprobe is not on PATH: uploaded videos will fail to process.") }
        let threads =
            (0..<workerCount).map { index in
                Thread { [self] in
                    while !isStopped {
                        if !runOnce(worker: leases.server + "/worker-\(index)") { _ = signal.wait(timeout: .now() + 10) }
                    }
                    running.leave()
                }
            } + [
                Thread { [self] in
                    var ticks = 1
                    while tickerWake.wait(timeout: .now() + .seconds(Int(Self.tick.components.seconds))) == .timedOut, !isStopped {
                        renewLeases()
                        if ticks % 4 == 0 { sweep() }
                        ticks += 1
                    }
                    running.leave()
                }
            ]
        state.withLock { $0.started = true }
        for thread in threads {
            running.enter()
            thread.name = "catalog-videos"
            thread.start()
        }
    }

    /// Stops, and waits (at most 30 s) for the workers and the ticker to end: running jobs
    /// are killed and wait for the next start, and nothing of theirs touches the database
    /// once this returns (it is closed next).
    func stop() {
        let started = state.withLock { state in
            state.stopped = true
            return state.started
        }
        for _ in 0..<workerCount { signal.signal() }
        tickerWake.signal()
        if started { _ = running.wait(timeout: .now() + 30) }
    }

    /// A job waits: a worker wakes.
    func jobQueued() {
        signal.signal()
    }

    /// Claims one job as `worker` and runs it here. - Returns: whether there was one.
    @discardableResult
    func runOnce(worker: String) -> Bool {
        let job: VideoRow?
        do {
            job = try records.claim(worker: worker, until: Timestamp.milliseconds(Date()) + Self.jobLease)
        } catch {
            Self.logger.warning("Claiming a video job failed: \(error)")
            return false
        }
        guard let job else { return false }
        state.withLock { $0.running[job.id] = worker }
        defer { state.withLock { _ = $0.running.removeValue(forKey: job.id) } }
        run(job, worker: worker)
        return true
    }

    private func run(_ job: VideoRow, worker: String) {
        let started = ContinuousClock.now
        do {
            guard job.attempts <= 3 else { throw VideoRefusal("Processing was interrupted too many times.") }
            guard let pipeline else { throw VideoRefusal("The server cannot process video (ffmpeg is not installed).") }
            let (video, duration) = try process(job, pipeline)
            let stream = publicURL.map { $0 + (video.hls ?? "") }
            guard try records.finish(job.id, worker: worker, video: video, duration: duration, stream: stream) else {
                // Released meanwhile (replaced, its item deleted): what it kept goes now.
                if try records.row(job.id).map({ $0.state == .released }) ?? true { try storage.removeVideo(job.id) }
                return
            }
            Self.logger.notice("Video \(job.id) is ready (\(ContinuousClock.now - started)).")
        } catch let refusal as VideoRefusal {
            Self.logger.notice("Video \(job.id) failed: \(refusal)")
            _ = try? records.finish(job.id, worker: worker, video: Video(id: job.id, status: .failed, error: refusal.description), duration: nil, stream: nil)
        } catch is CancellationError {
            try? records.requeue(job.id, worker: worker, countsAsAttempt: false)
        } catch {
            Self.logger.warning("Video \(job.id) could not be processed (attempt \(job.attempts)): \(error)")
            try? records.requeue(job.id, worker: worker, countsAsAttempt: true)
        }
    }

    /// Packages `job`'s upload and keeps what it made. - Returns: the ready video, and its running time.
    private func process(_ job: VideoRow, _ pipeline: VideoPipeline) throws -> (Video, Double) {
        let directory = try scratch("job-" + job.id)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let isCancelled: @Sendable () -> Bool = { [self] in isStopped }
        // The upload becomes the source here, not in the request that finished it: a
        // crash between its record and this step leaves a job that does it.
        try storage.finishUpload(job.progress)
        let source = try storage.source(job.id, scratch: directory, limit: maxBytes)
        let probe = try pipeline.probe(source, scratch: directory, isCancelled: isCancelled)
        let output = directory + "/media"
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        let packaged = try pipeline.package(source, probe: probe, bytes: job.progress.length, output: output, scratch: directory, isCancelled: isCancelled)
        let poster = try keepPoster(packaged.posterPath, uploader: job.uploader)
        try storage.keepOutputs(job.id, from: output)
        return (VideoMember.ready(id: job.id, duration: probe.duration, width: probe.width, height: probe.height, poster: poster), probe.duration)
    }

    /// The poster frame at `path`, through the image pipeline: normalized, recorded, kept.
    private func keepPoster(_ path: String, uploader: CatalogID?) throws -> ImageReference {
        guard let bytes = FileManager.default.contents(atPath: path) else { throw VideoRefusal("No poster frame could be taken.") }
        let image = try ImagePipeline.normalize(Array(bytes), declared: .jpeg)
        let reference = ImageReference(
            url: ImageMember.path + image.hash, width: image.width, height: image.height, blurHash: image.blurHash, contentType: image.format.contentType)
        // Recorded before its bytes are kept (the image sweep's order); no quota: the server made it.
        let recorded = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        imageRecords.record(reference, ImageUpload(byteSize: image.bytes.count, uploader: uploader, quota: nil)) { result in
            recorded.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        try recorded.withLock { $0 }?.get()
        try images.store.put(MediaKey.original(image.hash), image.bytes)
        return reference
    }

    // MARK: The ticker

    private func renewLeases() {
        let until = Timestamp.milliseconds(Date())
        let jobs = state.withLock { $0.running }
        do {
            // Each worker's own job, once (a worker runs one at a time).
            for (id, worker) in jobs { try records.renew(id, worker: worker, until: until + Self.jobLease) }
            for (id, holder) in leases.current { try records.renewUpload(id, holder: holder, until: until + UploadLeases.lease) }
        } catch {
            Self.logger.warning("Renewing video leases failed: \(error)")
        }
    }

    /// Ends expired uploads and removes released videos' files (at most a hundred of each a round).
    func sweep() {
        do {
            for row in try records.expire() { try? storage.abortUpload(row.progress) }
            for row in try records.released() {
                // Its upload, finished or not (an object store forgets a completed one's id).
                try? storage.abortUpload(row.progress)
                try storage.removeVideo(row.id)
                try records.forget(row.id)
            }
        } catch {
            Self.logger.warning("Sweeping videos failed: \(error)")
        }
    }
}
