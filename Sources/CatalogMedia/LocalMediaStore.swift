import Foundation

/// Media kept in a local directory, each key a file: written to a temporary file in the
/// same directory tree, `fsync`ed, renamed into place and its directory `fsync`ed, so a
/// crash never leaves half a file under a real name. Content-addressed keys make a
/// second write of the same key a no-op.
package struct LocalMediaStore: MediaStore {
    package let root: URL
    private var incoming: URL { root.appendingPathComponent(".incoming", isDirectory: true) }

    /// The store in `directory`, made when missing.
    package init(directory: String) throws(MediaStoreError) {
        root = URL(fileURLWithPath: directory, isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: root.appendingPathComponent(".incoming"), withIntermediateDirectories: true)
        } catch {
            throw MediaStoreError("Cannot create the media directory \(directory): \(error.localizedDescription)")
        }
    }

    /// The store in `root`, as it is (a directory known to exist).
    init(root: URL) {
        self.root = root
    }

    package var location: String { root.path }

    private func url(_ key: String) -> URL { root.appendingPathComponent(key) }

    package func put(_ key: String, _ bytes: [UInt8]) throws(MediaStoreError) {
        let target = url(key)
        if FileManager.default.fileExists(atPath: target.path) { return }
        let directory = target.deletingLastPathComponent()
        let temporary = incoming.appendingPathComponent(UUID().uuidString)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Self.writeSynced(bytes, to: temporary.path)
            guard rename(temporary.path, target.path) == 0 else { throw MediaStoreError("rename: \(String(cString: strerror(errno)))") }
            try Self.syncDirectory(directory.path)
        } catch let error as MediaStoreError {
            unlink(temporary.path)
            throw error
        } catch {
            unlink(temporary.path)
            throw MediaStoreError("Cannot write \(key): \(error.localizedDescription)")
        }
    }

    package func get(_ key: String, limit: Int) throws(MediaStoreError) -> [UInt8]? {
        let descriptor = open(url(key).path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw MediaStoreError("Cannot open \(key): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw MediaStoreError("Cannot stat \(key)") }
        let size = Int(status.st_size)
        guard size <= limit else { throw MediaStoreError("\(key) holds \(size) bytes, more than \(limit)") }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let count = bytes.withUnsafeMutableBytes { buffer in buffer.baseAddress.map { read(descriptor, $0 + done, size - done) } ?? -1 }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw MediaStoreError("Cannot read \(key)") }
            done += count
        }
        return bytes
    }

    package func delete(_ key: String) throws(MediaStoreError) {
        guard unlink(url(key).path) == 0 || errno == ENOENT else { throw MediaStoreError("Cannot remove \(key): \(String(cString: strerror(errno)))") }
    }

    package func list(prefix: String) throws(MediaStoreError) -> [(key: String, modified: Int64)] {
        let directory = url(prefix)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        return names.compactMap { name in
            var status = stat()
            guard stat(directory.appendingPathComponent(name).path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
            return (prefix + name, Int64(status.st_mtim.tv_sec) * 1000 + Int64(status.st_mtim.tv_nsec) / 1_000_000)
        }
    }

    /// Puts every original of this store into the store at `directory` (made when
    /// missing): hard links where both are on one disk (originals never change, so a link is
    /// a copy), copies elsewhere; those already there are left. - Returns: how many it holds.
    package func copyOriginals(to directory: String) throws(MediaStoreError) -> Int {
        let target = try LocalMediaStore(directory: directory)
        let originals = try list(prefix: MediaKey.originals)
        for (key, _) in originals where !FileManager.default.fileExists(atPath: target.url(key).path) {
            do {
                try FileManager.default.createDirectory(at: target.url(key).deletingLastPathComponent(), withIntermediateDirectories: true)
                if link(url(key).path, target.url(key).path) != 0 {
                    guard let bytes = try get(key, limit: .max) else { continue }
                    try target.put(key, bytes)
                }
            } catch let error as MediaStoreError {
                throw error
            } catch {
                throw MediaStoreError("Cannot copy \(key) to \(directory): \(error.localizedDescription)")
            }
        }
        return originals.count
    }

    /// Puts every hosted video's files of this store (`videos/…`, which never change once
    /// written: a job run again writes a new set) into the store at `directory`, as
    /// ``copyOriginals(to:)`` does. - Returns: how many videos it holds.
    package func copyVideos(to directory: String) throws(MediaStoreError) -> Int {
        let target = try LocalMediaStore(directory: directory)
        let videos = root.appendingPathComponent("videos")
        guard let ids = try? FileManager.default.contentsOfDirectory(atPath: videos.path) else { return 0 }
        for id in ids {
            for file in try LocalVideoStorage.files(in: videos.appendingPathComponent(id).path) {
                let key = "videos/\(id)/\(file)"
                guard !FileManager.default.fileExists(atPath: target.url(key).path) else { continue }
                do {
                    try FileManager.default.createDirectory(at: target.url(key).deletingLastPathComponent(), withIntermediateDirectories: true)
                    if link(url(key).path, target.url(key).path) != 0 {
                        try FileManager.default.copyItem(at: url(key), to: target.url(key))
                    }
                } catch {
                    throw MediaStoreError("Cannot copy \(key) to \(directory): \(error.localizedDescription)")
                }
            }
        }
        return ids.count
    }

    /// Writes `bytes` to a new file at `path` and `fsync`s it.
    static func writeSynced(_ bytes: [UInt8], to path: String) throws(MediaStoreError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw MediaStoreError("Cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in buffer.baseAddress.map { write(descriptor, $0 + done, bytes.count - done) } ?? -1 }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw MediaStoreError("Cannot write \(path): \(String(cString: strerror(errno)))") }
            done += count
        }
        guard fsync(descriptor) == 0 else { throw MediaStoreError("Cannot fsync \(path): \(String(cString: strerror(errno)))") }
    }

    /// `fsync`s a directory, so a rename into it survives a crash.
    static func syncDirectory(_ path: String) throws(MediaStoreError) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw MediaStoreError("Cannot open \(path)") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw MediaStoreError("Cannot fsync \(path)") }
    }
}
