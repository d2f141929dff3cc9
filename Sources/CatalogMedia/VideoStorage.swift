import CatalogSchema
import Foundation

/// Where hosted video's bytes are kept: the seam between the catalog's rules for uploads
/// and video, and the disk or object store under them. An upload arrives through appends
/// (``openAppend(_:)`` then ``commit(_:)``), each durable once committed; the finished
/// upload becomes the video's source (``finishUpload(_:)``), which processing reads as a
/// local file and whose outputs it keeps (``keepOutputs(_:from:)``); players fetch those
/// through ``locate(_:_:)``.
///
/// Keys: `videos/{id}/source` (the upload as sent), `videos/{id}/media/…` (what players
/// fetch). Every call blocks its thread (disk or network): callers run them on a pool,
/// never on an event loop, except ``UploadAppend/write(_:)``, a write to a local file's
/// page cache.
package protocol VideoStorage: Sendable {
    /// Starts upload `id`: the store's handle for it, if it keeps one (S3: the multipart upload).
    func beginUpload(_ id: String) throws(MediaStoreError) -> String?
    /// Opens an append to `upload` at its durable offset: where the next bytes go. Bytes
    /// past that offset from an append that was never committed (a crash) are dropped.
    func openAppend(_ upload: UploadProgress) throws(MediaStoreError) -> UploadAppend
    /// `append` received more (called after each write, in order, off the event loop):
    /// an object store sends the whole parts it holds now, so a long body never waits in
    /// the spool whole.
    func appended(_ append: UploadAppend) throws(MediaStoreError)
    /// Keeps what `append` received: durable once this returns. - Returns: the upload's
    /// state with them (its offset, and on S3 its parts and tail), for the database.
    func commit(_ append: UploadAppend) throws(MediaStoreError) -> UploadProgress
    /// The database now holds `committed` in place of `replaced`: what only `replaced`
    /// needed goes (on S3, its tail object).
    func superseded(_ replaced: UploadProgress, by committed: UploadProgress)
    /// Makes the whole upload (its offset at its length) the video's source.
    func finishUpload(_ upload: UploadProgress) throws(MediaStoreError)
    /// Drops an unfinished upload's bytes.
    func abortUpload(_ upload: UploadProgress) throws(MediaStoreError)
    /// The source of video `id` as a local file to read: kept in place on local disk, or
    /// downloaded into the directory `scratch` (at most `limit` bytes).
    func source(_ id: String, scratch: String, limit: Int) throws(MediaStoreError) -> String
    /// Keeps the files in the local `directory` (relative paths, no `..`) as video `id`'s
    /// media, in place of any kept before (a job run again writes the same names).
    func keepOutputs(_ id: String, from directory: String) throws(MediaStoreError)
    /// Where the media file `name` (relative to `videos/{id}/media/`) of video `id` is for a player.
    func locate(_ id: String, _ name: String) throws(MediaStoreError) -> VideoLocation
    /// Removes every file of video `id`, its unfinished upload's included.
    func removeVideo(_ id: String) throws(MediaStoreError)
    /// Where it keeps them, for logs (no secrets).
    var location: String { get }
}

/// Where a player gets a media file.
package enum VideoLocation: Sendable {
    /// A local file at this path.
    case file(String)
    /// The file's bytes (a playlist or caption file from an object store, served by the
    /// server itself so the relative paths in it stay the server's).
    case bytes([UInt8])
    /// A short-lived URL the object store serves it from (a presigned `GET`).
    case redirect(String)
    /// There is none.
    case missing
}

/// One append to an upload: an open file the request's bytes are written to as they
/// arrive (the upload's own file on local disk; a spool file on S3, holding the tail kept
/// before them, whose whole parts go to the store as they fill). Used by one thread at a
/// time, in order (the writes, then the commit).
package final class UploadAppend: @unchecked Sendable {
    /// The upload as it was when the append began.
    package let upload: UploadProgress
    /// The open file.
    package let descriptor: Int32
    /// Where in that file the upload's byte at ``UploadProgress/offset`` is.
    package let base: Int
    /// Bytes received so far (written after ``base``).
    package private(set) var received = 0
    /// Whether a write failed (the disk is full): the append then keeps nothing new.
    package private(set) var failed = false
    /// Removes the file, when it is a spool, once closed.
    private let spoolPath: String?
    /// The parts sent to an object store while the body arrived, not yet recorded.
    package var sentParts: [UploadPart] = []
    /// The next part's number.
    package var nextPart: Int
    /// Where in the file the first byte no part has sent is.
    package var unsent = 0
    /// How many of the bytes received have been handed to the disk's writeback.
    package var writtenBack = 0

    package init(upload: UploadProgress, descriptor: Int32, base: Int, spoolPath: String?) {
        self.upload = upload
        self.descriptor = descriptor
        self.base = base
        self.spoolPath = spoolPath
        nextPart = upload.nextPart
    }

    /// The bytes of the file: what the append began with and what it received.
    package var spooled: Int { base + received }

    /// Writes `bytes` after those received (to the page cache: no `fsync`).
    /// - Returns: false when the write failed.
    package func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !failed else { return false }
        var done = 0
        while done < bytes.count {
            let count = Glibc.write(descriptor, bytes.baseAddress.map { $0 + done }, bytes.count - done)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                failed = true
                return false
            }
            done += count
        }
        received += bytes.count
        return true
    }

    deinit {
        close(descriptor)
        if let spoolPath { unlink(spoolPath) }
    }
}
