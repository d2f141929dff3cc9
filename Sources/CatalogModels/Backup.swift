/// What `POST /admin/backups` wrote: a consistent copy of the live database.
public struct Backup: Codable, Sendable, Hashable {
    /// The file's name in the server's backup folder (the folder itself is not revealed).
    public var name: String
    /// Its size in bytes.
    public var bytes: Int
    /// The result of `PRAGMA integrity_check` on the copy: `ok`.
    public var integrityCheck: String
    /// How many image originals were copied beside it (into the folder named as the copy
    /// with `.media` in place of `.sqlite`); absent when images are kept in S3, whose
    /// bucket versioning keeps them instead.
    public var images: Int?
    /// How many hosted videos' files (sources and what players fetch) were copied beside
    /// it, in the same folder; absent when they are kept in S3.
    public var videos: Int?

    /// Creates a backup description.
    public init(name: String, bytes: Int, integrityCheck: String, images: Int? = nil, videos: Int? = nil) {
        self.name = name
        self.bytes = bytes
        self.integrityCheck = integrityCheck
        self.images = images
        self.videos = videos
    }
}
