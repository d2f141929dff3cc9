import CLinux
import CatalogSchema
import Foundation

/// Hosted video on local disk, in the media directory: an upload is the file
/// `uploads/{id}`, appended to in place and `fdatasync`ed before its offset is recorded;
/// once whole it is renamed to `videos/{id}/source`. Processing writes its outputs into a
/// scratch directory beside them (same disk), renamed to `videos/{id}/media` once every
/// file is synced, so a player never sees half of them. Players get the files by
/// `sendfile`.
package struct LocalVideoStorage: VideoStorage {
    package let root: URL

    /// The storage in the media directory `media` (its `.incoming` holds scratch work).
    package init(_ media: LocalMediaStore) throws(MediaStoreError) {
        root = media.root
        for directory in ["uploads", "videos"] {
            do {
                try FileManager.default.createDirectory(at: root.appendingPathComponent(directory), withIntermediateDirectories: true)
            } catch {
                throw MediaStoreError("Cannot create \(directory) in \(root.path): \(error.localizedDescription)")
            }
        }
    }

    package var location: String { root.path }

    private func uploadPath(_ id: String) -> String { root.appendingPathComponent("uploads/" + id).path }
    private func videoPath(_ id: String) -> String { root.appendingPathComponent("videos/" + id).path }

    package func beginUpload(_ id: String) throws(MediaStoreError) -> String? {
        let descriptor = open(uploadPath(id), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw MediaStoreError("Cannot create the upload \(id): \(String(cString: strerror(errno)))") }
        close(descriptor)
        try LocalMediaStore.syncDirectory(root.appendingPathComponent("uploads").path)
        return nil
    }

    package func openAppend(_ upload: UploadProgress) throws(MediaStoreError) -> UploadAppend {
        let descriptor = open(uploadPath(upload.id), O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw MediaStoreError("Cannot open the upload \(upload.id): \(String(cString: strerror(errno)))") }
        // Bytes past the durable offset were never acknowledged (a crash mid-append): gone.
        guard ftruncate(descriptor, off_t(upload.offset)) == 0, lseek(descriptor, off_t(upload.offset), SEEK_SET) >= 0 else {
            close(descriptor)
            throw MediaStoreError("Cannot position the upload \(upload.id): \(String(cString: strerror(errno)))")
        }
        return UploadAppend(upload: upload, descriptor: descriptor, base: upload.offset, spoolPath: nil)
    }

    /// Starts the disk's writeback of every 4 MiB received, while the rest arrives: the
    /// sync that ends the append then waits only for the last of them.
    package func appended(_ append: UploadAppend) throws(MediaStoreError) {
        guard append.received - append.writtenBack >= 4 << 20 else { return }
        _ = clinux_start_writeback(append.descriptor, Int64(append.base + append.writtenBack), Int64(append.received - append.writtenBack))
        append.writtenBack = append.received
    }

    package func commit(_ append: UploadAppend) throws(MediaStoreError) -> UploadProgress {
        guard !append.failed else { throw MediaStoreError("Cannot write the upload \(append.upload.id): the disk refused it") }
        guard fdatasync(append.descriptor) == 0 else { throw MediaStoreError("Cannot sync the upload \(append.upload.id): \(String(cString: strerror(errno)))") }
        var progress = append.upload
        progress.offset += append.received
        return progress
    }

    package func superseded(_ replaced: UploadProgress, by committed: UploadProgress) {}

    package func finishUpload(_ upload: UploadProgress) throws(MediaStoreError) {
        let directory = videoPath(upload.id)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw MediaStoreError("Cannot create \(directory): \(error.localizedDescription)")
        }
        // Already moved (a finish repeated after a crash between the move and its record).
        if access(uploadPath(upload.id), F_OK) != 0, access(directory + "/source", F_OK) == 0 { return }
        guard rename(uploadPath(upload.id), directory + "/source") == 0 else {
            throw MediaStoreError("Cannot keep the upload \(upload.id): \(String(cString: strerror(errno)))")
        }
        try LocalMediaStore.syncDirectory(directory)
        try LocalMediaStore.syncDirectory(root.appendingPathComponent("uploads").path)
    }

    package func abortUpload(_ upload: UploadProgress) throws(MediaStoreError) {
        guard unlink(uploadPath(upload.id)) == 0 || errno == ENOENT else {
            throw MediaStoreError("Cannot remove the upload \(upload.id): \(String(cString: strerror(errno)))")
        }
    }

    package func source(_ id: String, scratch: String, limit: Int) throws(MediaStoreError) -> String {
        let path = videoPath(id) + "/source"
        guard access(path, R_OK) == 0 else { throw MediaStoreError("The source of video \(id) is not there") }
        return path
    }

    package func keepOutputs(_ id: String, from directory: String) throws(MediaStoreError) {
        for file in try Self.files(in: directory) { try Self.sync(directory + "/" + file) }
        for sub in Set(try Self.files(in: directory).compactMap { $0.split(separator: "/").dropLast().first.map(String.init) }) {
            try LocalMediaStore.syncDirectory(directory + "/" + sub)
        }
        try LocalMediaStore.syncDirectory(directory)
        let target = videoPath(id) + "/media"
        do {
            try FileManager.default.createDirectory(atPath: videoPath(id), withIntermediateDirectories: true)
        } catch {
            throw MediaStoreError("Cannot create \(videoPath(id)): \(error.localizedDescription)")
        }
        // What a run before kept is moved aside first, then removed: the new set replaces it whole.
        let aside = root.appendingPathComponent(".incoming/replaced-" + UUID().uuidString).path
        let hadOld = rename(target, aside) == 0
        guard rename(directory, target) == 0 else { throw MediaStoreError("Cannot keep the media of video \(id): \(String(cString: strerror(errno)))") }
        try LocalMediaStore.syncDirectory(videoPath(id))
        if hadOld { try? FileManager.default.removeItem(atPath: aside) }
    }

    package func locate(_ id: String, _ name: String) throws(MediaStoreError) -> VideoLocation {
        let path = videoPath(id) + "/media/" + name
        return access(path, F_OK) == 0 ? .file(path) : .missing
    }

    package func removeVideo(_ id: String) throws(MediaStoreError) {
        unlink(uploadPath(id))
        do {
            if FileManager.default.fileExists(atPath: videoPath(id)) { try FileManager.default.removeItem(atPath: videoPath(id)) }
        } catch {
            throw MediaStoreError("Cannot remove video \(id): \(error.localizedDescription)")
        }
    }

    /// A scratch directory on the same disk as the videos, for a job's outputs.
    package func scratchDirectory(_ name: String) throws(MediaStoreError) -> String {
        let path = root.appendingPathComponent(".incoming/" + name).path
        try? FileManager.default.removeItem(atPath: path)
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw MediaStoreError("Cannot create \(path): \(error.localizedDescription)")
        }
        return path
    }

    /// The regular files under `directory`, as paths relative to it.
    static func files(in directory: String) throws(MediaStoreError) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { throw MediaStoreError("Cannot list \(directory)") }
        var files: [String] = []
        while let name = enumerator.nextObject() as? String {
            var status = stat()
            if stat(directory + "/" + name, &status) == 0, status.st_mode & S_IFMT == S_IFREG { files.append(name) }
        }
        return files.sorted()
    }

    /// `fsync`s the file at `path`.
    static func sync(_ path: String) throws(MediaStoreError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw MediaStoreError("Cannot open \(path)") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw MediaStoreError("Cannot fsync \(path)") }
    }
}
