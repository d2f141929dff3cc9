import CatalogMedia
import CatalogModels
import CatalogSchema
import CatalogStore
import Foundation
import Logging

/// The demo catalog's pictures, made by the catalog itself (``DemoArtwork``: no
/// third-party picture): each game's artwork and each item's poster (16:9), each
/// playlist's cover (square), kept as an upload is: normalized, recorded, stored, shown.
/// Blocking: run once, when the demo catalog is loaded, before the server listens.
enum DemoImages {
    private static let logger = Logger(label: "catalog.images")

    /// Adds them to every game, item and playlist of `store` (the demo catalog, just loaded);
    /// a failure is logged, never fatal: the catalog works without its pictures.
    static func add(to store: CatalogStore, library: ImageLibrary) {
        let wide = (width: 960, height: 540), square = (width: 640, height: 640)
        do {
            for game in try store.games.list(ListRequest(limit: 100), as: Game.self).items {
                try attach(game.name, size: wide, to: game.id, in: store.games, store, library)
            }
            for item in try store.items.list(ListRequest(limit: 100), as: PlayableItem.self).items {
                try attach(item.title, size: wide, to: item.id, in: store.items, store, library)
            }
            for playlist in try store.playlists.list(ListRequest(limit: 100), as: Playlist.self).items {
                try attach(playlist.title, size: square, to: playlist.id, in: store.playlists, store, library)
            }
        } catch {
            logger.warning("The demo catalog's pictures could not be made: \(error)")
        }
    }

    private static func attach(
        _ title: String, size: (width: Int, height: Int), to id: CatalogID, in resource: ResourceStore, _ store: CatalogStore, _ library: ImageLibrary
    ) throws {
        let image = try ImagePipeline.normalize(DemoArtwork.jpeg(for: title, width: size.width, height: size.height), declared: .jpeg)
        let reference = ImageReference(
            url: ImageMember.path + image.hash, width: image.width, height: image.height, blurHash: image.blurHash, contentType: image.format.contentType)
        // A fresh catalog: no sweep can race the bytes kept before their record.
        try library.store.put(MediaKey.original(image.hash), image.bytes)
        try resource.setImageNow(id, to: reference, upload: ImageUpload(byteSize: image.bytes.count, uploader: nil, quota: nil))
    }
}
