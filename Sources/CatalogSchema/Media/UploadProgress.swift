// What the media storage and the database share of an upload (``VideoStorage`` keeps
// its bytes, ``VideoRecords`` its row).

/// The durable state of an upload, as the database keeps it.
package struct UploadProgress: Sendable, Equatable {
    /// The upload's id (random, unguessable).
    package var id: String
    /// How many bytes it has in all.
    package var length: Int
    /// How many of them are kept (durable).
    package var offset: Int
    /// The store's handle (S3: the multipart upload's id).
    package var storeUpload: String?
    /// The S3 parts kept so far, in order.
    package var parts: [UploadPart]
    /// The next part's number.
    package var nextPart: Int
    /// The bytes after the parts, kept as an object of their own until a whole part is there.
    package var tailSize: Int

    package init(id: String, length: Int, offset: Int = 0, storeUpload: String? = nil, parts: [UploadPart] = [], nextPart: Int = 1, tailSize: Int = 0) {
        self.id = id
        self.length = length
        self.offset = offset
        self.storeUpload = storeUpload
        self.parts = parts
        self.nextPart = nextPart
        self.tailSize = tailSize
    }

    /// The parts as the database keeps them: one `number etag size` line each.
    package var partsText: String {
        parts.map { "\($0.number) \($0.etag) \($0.size)" }.joined(separator: "\n")
    }

    /// The parts `text` (``partsText``) lists; `nil` when it is malformed.
    package static func parts(_ text: String) -> [UploadPart]? {
        var parts: [UploadPart] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 3, let number = Int(fields[0]), let size = Int(fields[2]) else { return nil }
            parts.append(UploadPart(number: number, etag: String(fields[1]), size: size))
        }
        return parts
    }
}

/// A part of an S3 multipart upload, kept.
package struct UploadPart: Sendable, Equatable {
    package var number: Int
    /// Its `ETag`, as the store sent it (quotes included).
    package var etag: String
    package var size: Int

    package init(number: Int, etag: String, size: Int) {
        self.number = number
        self.etag = etag
        self.size = size
    }
}
