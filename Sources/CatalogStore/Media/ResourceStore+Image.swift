import CatalogModels
import CatalogSchema
import Foundation

extension ResourceStore {
    /// Sets the image of the resource `id` (``ResourceSchema/image``) to `image` (recorded,
    /// with its bytes kept: ``ImageRecords/record(_:_:completion:)``), or removes it (`nil`),
    /// if `preconditions` hold: a change of the resource like any other (a new version, in
    /// the change feed). An image it stops showing is touched (the migration's triggers).
    package func setImage(
        _ id: CatalogID, to image: ImageReference?, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        precondition(schema.image != nil, "\(schema.type) has no image")
        submit(options, atomic: true, completion) { [self] db in
            let current = try db.fetchValue("SELECT version FROM \(schema.table) WHERE id = ?" + db.dialect.forUpdate, [id.rawValue]).int
            guard let current else { throw StoreError.notFound }
            try preconditions.check(current: current)
            if let image, try !db.exists("SELECT 1 FROM images WHERE hash = ?", [image.hash]) {
                throw StoreError.conflict("The image is no longer stored; upload it again.")
            }
            return try renderWritten(db, imageSQL, [image.map(ImageMember.json), Timestamp.milliseconds(Date()), id.rawValue])
        }
    }

    /// Records `image` (`upload`) and shows it on the resource `id` in one write, waited
    /// for: for the server's own pictures (the demo catalog's), whose bytes are kept first.
    package func setImageNow(_ id: CatalogID, to image: ImageReference, upload: ImageUpload) throws(StoreError) {
        try guarded {
            try database.write(atomic: true) { [self] db in
                try ImageRecords.record(db, image, upload)
                _ = try renderWritten(db, imageSQL, [ImageMember.json(image), Timestamp.milliseconds(Date()), id.rawValue])
            }
        }
    }
}
