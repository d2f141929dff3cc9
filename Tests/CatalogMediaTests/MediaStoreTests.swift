import CatalogMedia
import CatalogModels
import Foundation
import Testing

/// The media stores behind their seam, each the real thing: a local directory, and an S3
/// server (SeaweedFS, started by `.ci/s3.sh`, named by `CATALOG_TEST_S3_ENDPOINT`).
@Suite struct MediaStoreTests {
    static let s3Endpoint = ProcessInfo.processInfo.environment["CATALOG_TEST_S3_ENDPOINT"]
    /// The credentials `.ci/s3.sh` gives its server.
    static let s3Environment = ["AWS_ACCESS_KEY_ID": "catalog", "AWS_SECRET_ACCESS_KEY": "catalog-secret"]

    /// A store under a fresh prefix of the test S3 server's bucket (made when missing).
    static func s3Store(prefix: String = "") throws -> S3MediaStore {
        let endpoint = try #require(s3Endpoint)
        let address = try S3MediaStore.Address("s3://catalog-tests/\(UUID().uuidString.lowercased())/\(prefix)?endpoint=\(endpoint)")
        let store = try S3MediaStore(address, environment: s3Environment)
        try store.createBucket()
        return store
    }

    /// What every store does: keeps bytes whole, lists them with their time, forgets them.
    static func exercise(_ store: some MediaStore) throws {
        let bytes = (0..<100_000).map { UInt8($0 % 251) }
        let key = MediaKey.original(String(repeating: "ab", count: 32))
        #expect(try store.get(key, limit: 1 << 20) == nil)
        try store.put(key, bytes)
        try store.put(key, bytes)  // again: the same content, nothing changes
        #expect(try store.get(key, limit: 1 << 20) == bytes)
        #expect(throws: MediaStoreError.self) { try store.get(key, limit: 1000) }
        let listed = try store.list(prefix: MediaKey.originals)
        #expect(listed.map(\.key) == [key])
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(listed.allSatisfy { abs($0.modified - now) < 120_000 }, "\(listed)")
        try store.delete(key)
        try store.delete(key)  // absent: nothing to do
        #expect(try store.get(key, limit: 1 << 20) == nil)
        #expect(try store.list(prefix: MediaKey.originals).isEmpty)
    }

    @Test func aLocalDirectoryKeepsWholeFilesOnly() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LocalMediaStore(directory: directory.path)
        try Self.exercise(store)
        // Writes go through .incoming and leave nothing there.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent(".incoming").path).isEmpty)
    }

    @Test(.enabled(if: s3Endpoint != nil, "needs CATALOG_TEST_S3_ENDPOINT (.ci/s3.sh)")) func anS3BucketKeepsObjectsSignedWithSigV4() throws {
        try Self.exercise(try Self.s3Store())
        // Under a deeper prefix, the prefix is the store's own: keys are listed without it.
        let prefixed = try Self.s3Store(prefix: "catalog/images")
        try prefixed.put(MediaKey.original("00"), [1, 2, 3])
        #expect(try prefixed.list(prefix: MediaKey.originals).map(\.key) == [MediaKey.original("00")])
    }

    @Test(.enabled(if: s3Endpoint != nil, "needs CATALOG_TEST_S3_ENDPOINT (.ci/s3.sh)")) func wrongCredentialsAreAFailureNamingNoSecret() throws {
        let store = try Self.s3Store()
        let address = store.address
        let wrong = try S3MediaStore(address, environment: ["AWS_ACCESS_KEY_ID": "catalog", "AWS_SECRET_ACCESS_KEY": "not-the-secret"])
        let error = try #require(throws: MediaStoreError.self) { try wrong.put(MediaKey.original("00"), [1]) }
        #expect(error.description.contains("403") && !error.description.contains("not-the-secret"), "\(error)")
    }

    @Test func anAddressIsCheckedAndTheCredentialsAreRequired() throws {
        let address = try S3MediaStore.Address("s3://bucket/some/prefix?endpoint=http://127.0.0.1:9000&region=eu-west-1")
        #expect(address.bucket == "bucket" && address.prefix == "some/prefix/" && address.endpoint == "http://127.0.0.1:9000" && address.region == "eu-west-1")
        let aws = try S3MediaStore.Address("s3://bucket", environment: ["AWS_REGION": "eu-central-1"])
        #expect(aws.endpoint == "https://s3.eu-central-1.amazonaws.com" && aws.prefix.isEmpty)
        for wrong in ["http://bucket", "s3://", "s3://bucket?endpoint=ftp://x", "s3://bucket?acl=public"] {
            #expect(throws: MediaStoreError.self, "\(wrong)") { try S3MediaStore.Address(wrong) }
        }
        #expect(throws: MediaStoreError.self) { try S3MediaStore(address, environment: [:]) }
    }
}
