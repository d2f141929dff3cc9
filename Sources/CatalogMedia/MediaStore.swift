/// Where the bytes of media are kept, by key (`originals/{sha256}`): the seam between the
/// catalog's rules and its storage. A local directory by default (``LocalMediaStore``);
/// S3-compatible object storage when several servers share one database
/// (``S3MediaStore``). Every call blocks its thread (disk or network): callers run them on
/// a pool, never on an event loop.
package protocol MediaStore: Sendable {
    /// Keeps `bytes` under `key`, durably and whole: once this returns, a crash loses
    /// nothing, and a crash before never leaves part of them under `key`.
    func put(_ key: String, _ bytes: [UInt8]) throws(MediaStoreError)
    /// The bytes under `key`, or `nil` when there are none; more than `limit` bytes fail.
    func get(_ key: String, limit: Int) throws(MediaStoreError) -> [UInt8]?
    /// Removes `key` (nothing when it is absent).
    func delete(_ key: String) throws(MediaStoreError)
    /// The keys under `prefix`, with when each was last written (milliseconds since 1970).
    func list(prefix: String) throws(MediaStoreError) -> [(key: String, modified: Int64)]
    /// Where it keeps them, for logs (no secrets).
    var location: String { get }
}

/// A media store that failed: a disk or the object store, never the client.
package struct MediaStoreError: Error, Sendable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// The keys media are kept under.
package enum MediaKey {
    /// The prefix of originals.
    package static let originals = "originals/"

    /// The key of the original named by `hash`.
    package static func original(_ hash: String) -> String { originals + hash }
}
