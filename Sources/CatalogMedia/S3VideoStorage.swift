import CLinux
import CatalogIdentity
import CatalogSchema
import Foundation

/// Hosted video in an S3-compatible bucket, for servers that share one database.
///
/// An upload is a multipart upload of `videos/{id}/source`. Each append is spooled to a
/// local file (after the tail kept before it), and its whole parts of ``partSize`` are
/// sent as they fill, each part's blocks freed in the spool once sent (the spool holds
/// about one part, whatever the body's length); what is left after the last whole part
/// (the tail) is kept as the object
/// `uploads/{id}/tail-{offset}` (named by the offset it ends at, so a crash before the
/// database records a new tail never overwrites the one it still names). The last append
/// sends the rest as the final part, and the upload completes. Memory stays at one part
/// whatever the clients send.
///
/// Players are redirected to short-lived presigned URLs for media files (the bytes never
/// pass through the server, the store serves byte ranges itself, and memory stays flat);
/// playlists and caption files are small, so the server serves them itself, which keeps
/// the relative paths in them the server's (a segment's URL is then the server's too, and
/// is redirected in turn).
package struct S3VideoStorage: VideoStorage {
    package let store: S3MediaStore
    /// The local directory appends are spooled to.
    package let spool: String
    /// The size of every part but the last.
    package let partSize: Int
    /// How long a presigned URL lasts, in seconds.
    package let presignedLifetime: Int

    /// The storage in `store`'s bucket, spooling to the local directory `spool` (made when
    /// missing), with parts sized for uploads of at most `maxBytes` (S3 keeps at most
    /// 10,000 parts, each but the last at least 5 MiB).
    package init(_ store: S3MediaStore, spool: String, maxBytes: Int, presignedLifetime: Int = 300) throws(MediaStoreError) {
        self.store = store
        self.spool = spool
        partSize = max(8 << 20, (maxBytes + 8_999) / 9_000)
        self.presignedLifetime = presignedLifetime
        do {
            try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
        } catch {
            throw MediaStoreError("Cannot create the spool directory \(spool): \(error.localizedDescription)")
        }
    }

    package var location: String { store.location }

    private static func sourceKey(_ id: String) -> String { "videos/\(id)/source" }
    private static func tailKey(_ upload: UploadProgress) -> String { "uploads/\(upload.id)/tail-\(upload.offset)" }

    package func beginUpload(_ id: String) throws(MediaStoreError) -> String? {
        let answer = try store.exchange("POST", path: store.objectPath(Self.sourceKey(id)) + "?uploads=", headers: ["Content-Type: application/octet-stream"])
        let text = String(decoding: answer.body, as: UTF8.self)
        guard answer.status == 200, let uploadID = ListPage.element("UploadId", in: text).first.map(ListPage.unescape), !uploadID.isEmpty else {
            throw store.failure("CreateMultipartUpload", Self.sourceKey(id), answer)
        }
        return uploadID
    }

    package func openAppend(_ upload: UploadProgress) throws(MediaStoreError) -> UploadAppend {
        let path = spool + "/" + upload.id + "-" + UUID().uuidString
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw MediaStoreError("Cannot create a spool file in \(spool): \(String(cString: strerror(errno)))") }
        let append = UploadAppend(upload: upload, descriptor: descriptor, base: upload.tailSize, spoolPath: path)
        if upload.tailSize > 0 {
            let answer = try store.exchange("GET", path: store.objectPath(Self.tailKey(upload)), download: descriptor, limit: upload.tailSize)
            guard answer.status == 200, !answer.truncated, lseek(descriptor, 0, SEEK_END) == off_t(upload.tailSize) else {
                throw store.failure("GET", Self.tailKey(upload), answer)
            }
        }
        return append
    }

    package func appended(_ append: UploadAppend) throws(MediaStoreError) {
        try sendParts(append, withRest: false)
    }

    /// Sends the whole parts of `append` not sent yet (and, `withRest`, what follows them
    /// as the final part), freeing each one's blocks in the spool once the store has it.
    private func sendParts(_ append: UploadAppend, withRest: Bool) throws(MediaStoreError) {
        guard let uploadID = append.upload.storeUpload else { throw MediaStoreError("The upload \(append.upload.id) has no multipart upload") }
        while append.spooled - append.unsent >= partSize || (withRest && append.unsent < append.spooled) {
            let size = min(partSize, append.spooled - append.unsent)
            let body = try fileBody(append.descriptor, offset: append.unsent, length: size)
            let key = Self.sourceKey(append.upload.id)
            let answer = try store.exchange(
                "PUT", path: store.objectPath(key) + "?partNumber=\(append.nextPart)&uploadId=" + S3MediaStore.escape(uploadID), file: body,
                timeout: store.timeout(forBytes: size))
            guard answer.status == 200, !answer.etag.isEmpty else { throw store.failure("UploadPart", key, answer) }
            append.sentParts.append(UploadPart(number: append.nextPart, etag: answer.etag, size: size))
            append.nextPart += 1
            _ = clinux_punch_hole(append.descriptor, Int64(append.unsent), Int64(size))
            append.unsent += size
        }
    }

    package func commit(_ append: UploadAppend) throws(MediaStoreError) -> UploadProgress {
        guard !append.failed else { throw MediaStoreError("Cannot spool the upload \(append.upload.id): the disk refused it") }
        var progress = append.upload
        guard append.received > 0 else { return progress }
        progress.offset += append.received
        // The last append sends the rest as the final part; another keeps it as the tail.
        try sendParts(append, withRest: progress.offset == progress.length)
        progress.parts += append.sentParts
        progress.nextPart = append.nextPart
        progress.tailSize = append.spooled - append.unsent
        if progress.tailSize > 0 {
            let body = try fileBody(append.descriptor, offset: append.unsent, length: progress.tailSize)
            let answer = try store.exchange("PUT", path: store.objectPath(Self.tailKey(progress)), file: body, headers: ["Content-Type: application/octet-stream"])
            guard (200..<300).contains(answer.status) else { throw store.failure("PUT", Self.tailKey(progress), answer) }
        }
        return progress
    }

    package func superseded(_ replaced: UploadProgress, by committed: UploadProgress) {
        guard replaced.tailSize > 0, Self.tailKey(replaced) != Self.tailKey(committed) || committed.tailSize == 0 else { return }
        try? store.delete(Self.tailKey(replaced))
    }

    package func finishUpload(_ upload: UploadProgress) throws(MediaStoreError) {
        guard let uploadID = upload.storeUpload else { throw MediaStoreError("The upload \(upload.id) has no multipart upload") }
        let key = Self.sourceKey(upload.id)
        if upload.parts.isEmpty {
            // Nothing was sent (an empty upload): S3 completes no upload without a part.
            try store.put(key, [])
            try? abortMultipart(key, uploadID)
            return
        }
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in upload.parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(Self.xmlEscape(part.etag))</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let answer = try store.exchange(
            "POST", path: store.objectPath(key) + "?uploadId=" + S3MediaStore.escape(uploadID), body: Array(xml.utf8), headers: ["Content-Type: application/xml"])
        let text = String(decoding: answer.body, as: UTF8.self)
        // A completion repeated after a crash finds the upload gone and the object there.
        if answer.status == 404, (try? store.exchange("HEAD", path: store.objectPath(key)).status) == 200 { return }
        // S3 may answer 200 with an error in the body.
        guard answer.status == 200, !text.contains("<Error>") else { throw store.failure("CompleteMultipartUpload", key, answer) }
        removeTails(upload.id)
    }

    package func abortUpload(_ upload: UploadProgress) throws(MediaStoreError) {
        if let uploadID = upload.storeUpload { try abortMultipart(Self.sourceKey(upload.id), uploadID) }
        removeTails(upload.id)
    }

    private func abortMultipart(_ key: String, _ uploadID: String) throws(MediaStoreError) {
        let answer = try store.exchange("DELETE", path: store.objectPath(key) + "?uploadId=" + S3MediaStore.escape(uploadID))
        guard (200..<300).contains(answer.status) || answer.status == 404 else { throw store.failure("AbortMultipartUpload", key, answer) }
    }

    private func removeTails(_ id: String) {
        for (key, _) in (try? store.list(prefix: "uploads/\(id)/")) ?? [] { try? store.delete(key) }
    }

    package func source(_ id: String, scratch: String, limit: Int) throws(MediaStoreError) -> String {
        let path = scratch + "/source"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw MediaStoreError("Cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let answer = try store.exchange("GET", path: store.objectPath(Self.sourceKey(id)), download: descriptor, limit: limit, timeout: store.timeout(forBytes: limit))
        guard answer.status == 200, !answer.truncated else { throw store.failure("GET", Self.sourceKey(id), answer) }
        return path
    }

    package func keepOutputs(_ id: String, from directory: String) throws(MediaStoreError) {
        let files = try LocalVideoStorage.files(in: directory)
        for file in files {
            let descriptor = open(directory + "/" + file, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw MediaStoreError("Cannot open \(file)") }
            defer { close(descriptor) }
            let length = Int(lseek(descriptor, 0, SEEK_END))
            let body = try fileBody(descriptor, offset: 0, length: length)
            let key = "videos/\(id)/media/" + file
            let answer = try store.exchange(
                "PUT", path: store.objectPath(key), file: body, headers: ["Content-Type: " + VideoFiles.contentType(file), "Cache-Control: " + VideoFiles.caching],
                timeout: store.timeout(forBytes: length))
            guard (200..<300).contains(answer.status) else { throw store.failure("PUT", key, answer) }
        }
        // What a run before kept under other names goes (a new set replaces it whole).
        let kept = Set(files.map { "videos/\(id)/media/" + $0 })
        for (key, _) in try store.list(prefix: "videos/\(id)/media/") where !kept.contains(key) { try store.delete(key) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    package func locate(_ id: String, _ name: String) throws(MediaStoreError) -> VideoLocation {
        let key = "videos/\(id)/media/" + name
        if VideoFiles.isText(name) {
            return try store.get(key, limit: VideoFiles.maxTextBytes).map(VideoLocation.bytes) ?? .missing
        }
        return .redirect(store.presignedGET(key, lifetime: presignedLifetime))
    }

    package func removeVideo(_ id: String) throws(MediaStoreError) {
        for prefix in ["videos/\(id)/", "uploads/\(id)/"] {
            for (key, _) in try store.list(prefix: prefix) { try store.delete(key) }
        }
    }

    /// `length` bytes of `descriptor` from `offset`, with their SHA-256 (read once to hash).
    private func fileBody(_ descriptor: Int32, offset: Int, length: Int) throws(MediaStoreError) -> S3MediaStore.FileBody {
        let digest = RunningDigest(.sha256)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var done = 0
        while done < length {
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, min($0.count, length - done), off_t(offset + done)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw MediaStoreError("Cannot read a spooled part: \(String(cString: strerror(errno)))") }
            buffer.withUnsafeBytes { digest.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            done += count
        }
        return S3MediaStore.FileBody(descriptor: descriptor, offset: offset, length: length, sha256: Crypto.hex(digest.finish()))
    }

    private static func xmlEscape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }
}

/// The files of a video's media, by name: their media types and caching.
package enum VideoFiles {
    /// The media type of the file `name`, by its extension.
    package static func contentType(_ name: String) -> String {
        switch name.split(separator: ".").last ?? "" {
        case "m3u8": "application/vnd.apple.mpegurl"
        case "mp4": "video/mp4"
        case "m4s": "video/iso.segment"
        case "vtt": "text/vtt; charset=utf-8"
        case "jpg": "image/jpeg"
        default: "application/octet-stream"
        }
    }

    /// Whether `name` is a playlist or caption file (small text, with relative paths in it).
    package static func isText(_ name: String) -> Bool {
        name.hasSuffix(".m3u8") || name.hasSuffix(".vtt")
    }

    /// The most bytes such a file may hold.
    package static let maxTextBytes = 4 << 20

    /// How a response with one of a video's files may be cached: they never change once
    /// kept (a new upload is a new video), so a year, immutable.
    package static let caching = "public, max-age=31536000, immutable"

    /// Whether `name` is a file a video's media may hold: `a-z0-9._-` segments, one or two
    /// of them, none starting with a dot (no `..`, no hidden files).
    package static func isValidName(_ name: String) -> Bool {
        let segments = name.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(segments.count), name.utf8.count <= 100 else { return false }
        return segments.allSatisfy { segment in
            guard let first = segment.utf8.first, first != UInt8(ascii: ".") else { return false }
            return segment.utf8.allSatisfy { byte in
                (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: "_")
            }
        }
    }
}
