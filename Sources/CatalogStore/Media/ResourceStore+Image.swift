import CatalogModels
import CatalogSchema
import Foundation

extension ResourceStore {
    /// Sets the image of the resource `id` (``ResourceSchema/image``) to `image`, or removes
    /// it (`nil`), if `preconditions` hold: a change of the resource like any other (a new
    /// version, in the change feed). A new image's `upload` is recorded in the same
    /// transaction, its uploader's quota checked (``ImageRecords``).
    package func setImage(
        _ id: CatalogID, to image: ImageReference?, upload: ImageUpload? = nil, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        precondition(schema.image != nil, "\(schema.type) has no image")
        submit(options, atomic: true, completion) { [self] db in
            let current = try db.fetchValue("SELECT version FROM \(schema.table) WHERE id = ?" + db.dialect.forUpdate, [id.rawValue]).int
            guard let current else { throw StoreError.notFound }
            try preconditions.check(current: current)
            if let image, let upload { try ImageRecords.record(db, image, upload) }
            return try renderWritten(db, imageSQL, [image.map(ImageMember.json), Timestamp.milliseconds(Date()), id.rawValue])
        }
    }
}
