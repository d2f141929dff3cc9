import CatalogModels
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Uploads a video file as an item's hosted video, resumably (tus 1.0.0): the upload is a
/// URL the server made (`/v1/uploads/{id}`), which is all an app keeps to go on after it
/// was killed or lost its network. Sending asks the server's offset first (`HEAD`) and
/// sends the rest from there in chunks, read from the file one at a time (memory stays at
/// one chunk whatever the file's size); a chunk that fails is sent again from the offset
/// the server then reports, which is always durable.
///
/// On iOS 17 and later, a background `URLSession` upload task speaks the IETF
/// resumable-upload draft the server also accepts (`POST /v1/playable-items/{id}/video`
/// with the file as the body): the system then resumes it by itself.
public struct VideoUploadClient: Sendable {
    let client: CatalogClient

    /// The tus version the server speaks.
    static let tus = ["Tus-Resumable": "1.0.0"]

    /// Starts an upload of `file` as the video of item `item` (the caller needs the
    /// `editor` role). - Returns: the upload's path on the server, to keep until it is done.
    public func start(_ file: URL, for item: CatalogID) async throws(CatalogClientError) -> String {
        let length = try Self.length(of: file)
        let name = Data(file.lastPathComponent.utf8).base64EncodedString()
        let (_, response) = try await client.send(
            "POST", "/v1/playable-items/\(item)/video", headers: Self.tus.merging(["Upload-Length": "\(length)", "Upload-Metadata": "filename \(name)"]) { $1 })
        guard let location = response.value(forHTTPHeaderField: "Location"), location.hasPrefix("/") else {
            throw .invalidResponse("The server named no upload.")
        }
        return location
    }

    /// The offset the upload at `path` has kept (durably) and its length.
    public func offset(of path: String) async throws(CatalogClientError) -> (offset: Int64, length: Int64) {
        let (_, response) = try await client.send("HEAD", path, headers: Self.tus)
        guard let offset = response.value(forHTTPHeaderField: "Upload-Offset").flatMap(Int64.init),
            let length = response.value(forHTTPHeaderField: "Upload-Length").flatMap(Int64.init)
        else { throw .invalidResponse("The server did not say the upload's offset.") }
        return (offset, length)
    }

    /// Sends what the upload at `path` lacks of `file`, from the offset the server reports,
    /// in chunks of `chunkSize` bytes; `progress` gets the bytes kept and the length after
    /// each. A chunk that fails is sent again from the server's offset, at most `retries`
    /// times in a row.
    public func resume(
        _ file: URL, at path: String, chunkSize: Int = 8 << 20, retries: Int = 5, progress: @Sendable (Int64, Int64) -> Void = { _, _ in }
    ) async throws(CatalogClientError) {
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: file)
        } catch {
            throw .transport("Cannot read \(file.path): \(error.localizedDescription)")
        }
        defer { try? handle.close() }
        var (offset, length) = try await self.offset(of: path)
        guard length == (try Self.length(of: file)) else { throw .invalidResponse("The upload at \(path) is not of this file (its length differs).") }
        progress(offset, length)
        var failures = 0
        while offset < length {
            let chunk: Data
            do {
                try handle.seek(toOffset: UInt64(offset))
                chunk = try handle.read(upToCount: Int(min(Int64(chunkSize), length - offset))) ?? Data()
            } catch {
                throw .transport("Cannot read \(file.path): \(error.localizedDescription)")
            }
            do throws(CatalogClientError) {
                let (_, response) = try await client.send(
                    "PATCH", path, body: chunk, contentType: "application/offset+octet-stream",
                    headers: Self.tus.merging(["Upload-Offset": "\(offset)"]) { $1 }, timeout: max(client.timeout, 120))
                guard let kept = response.value(forHTTPHeaderField: "Upload-Offset").flatMap(Int64.init) else {
                    throw CatalogClientError.invalidResponse("The server did not say the new offset.")
                }
                offset = kept
                failures = 0
            } catch {
                failures += 1
                // A refusal that cannot pass by itself (the upload is gone, too large) ends it.
                if let status = error.problem?.status, [400, 401, 403, 404, 410, 413, 415].contains(status) { throw error }
                guard failures <= retries else { throw error }
                try? await Task.sleep(for: .seconds(min(30, Double(1 << min(failures, 5)) / 2)))
                offset = try await self.offset(of: path).offset
            }
            progress(offset, length)
        }
    }

    /// Uploads `file` as the video of item `item`: ``start(_:for:)`` then
    /// ``resume(_:at:chunkSize:retries:progress:)``. - Returns: the upload's path.
    @discardableResult
    public func upload(
        _ file: URL, for item: CatalogID, chunkSize: Int = 8 << 20, progress: @Sendable (Int64, Int64) -> Void = { _, _ in }
    ) async throws(CatalogClientError) -> String {
        let path = try await start(file, for: item)
        try await resume(file, at: path, chunkSize: chunkSize, progress: progress)
        return path
    }

    /// Cancels the unfinished upload at `path`: its bytes go, and its item shows no video.
    public func cancel(_ path: String) async throws(CatalogClientError) {
        _ = try await client.send("DELETE", path, headers: Self.tus)
    }

    private static func length(of file: URL) throws(CatalogClientError) -> Int64 {
        do {
            guard let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber else { throw CocoaError(.fileReadUnknown) }
            return size.int64Value
        } catch {
            throw .transport("Cannot read \(file.path): \(error.localizedDescription)")
        }
    }
}

extension CatalogClient {
    /// Resumable uploads of items' videos.
    public var videos: VideoUploadClient { VideoUploadClient(client: self) }
}
