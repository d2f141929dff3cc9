/// What `POST /admin/backups` wrote: a consistent copy of the live database.
public struct Backup: Codable, Sendable, Hashable {
    /// The file's name in the backup folder.
    public var name: String
    /// Its path on the server.
    public var path: String
    /// Its size in bytes.
    public var bytes: Int
    /// The result of `PRAGMA integrity_check` on the copy: `ok`.
    public var integrityCheck: String

    /// Creates a backup description.
    public init(name: String, path: String, bytes: Int, integrityCheck: String) {
        self.name = name
        self.path = path
        self.bytes = bytes
        self.integrityCheck = integrityCheck
    }
}
