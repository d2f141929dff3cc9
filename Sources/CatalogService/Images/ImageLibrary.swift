import CatalogMedia
import CatalogModels
import CatalogSchema
import Foundation
import HTTPServer
import Logging
import Synchronization

/// The service's images: uploads made ready and kept in the media store, and renditions
/// made by libvips, cached on local disk (``RenditionCache``) and made once however many
/// clients ask at the same moment. Every decode, encode and store access runs on its own
/// pool, callers taking turns; a full pool answers 503 with `Retry-After`.
final class ImageLibrary: Sendable {
    /// An image's bytes as served, with their type.
    struct Served: Sendable {
        let bytes: [UInt8]
        let format: ImageFormat
    }

    let store: any MediaStore
    let cache: RenditionCache
    /// Where images are decoded and encoded (``ImageWork``).
    private var pool: WorkPool { ImageWork.pool }
    /// The requests waiting for a rendition being made, by its cache key.
    private let flights = Mutex<[String: [@Sendable (Result<Served, any Error>) -> Void]]>([:])
    private let made = Atomic<Int>(0)
    /// Bytes of uploads taken in and not yet answered (each held until its answer).
    private let uploadBytes = Atomic<Int>(0)
    /// The most bytes of uploads held at once, whatever the pool's queue holds: a few
    /// of the largest.
    static let maxUploadBytes = 5 * ImageRules.maxBytes
    private let logger = Logger(label: "catalog.images")

    init(store: any MediaStore, cache: RenditionCache) {
        self.store = store
        self.cache = cache
    }

    /// Renditions made since start (not served from the cache).
    var renditionsMade: Int { made.load(ordering: .relaxed) }

    /// Takes `bytes` of an upload from the budget of uploads held at once; false (taking
    /// nothing) when they do not fit. Given back with ``release(upload:)``.
    func reserve(upload bytes: Int) -> Bool {
        if uploadBytes.add(bytes, ordering: .relaxed).newValue > Self.maxUploadBytes {
            uploadBytes.subtract(bytes, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Gives back what ``reserve(upload:)`` took.
    func release(upload bytes: Int) {
        uploadBytes.subtract(bytes, ordering: .relaxed)
    }

    /// Checks and normalizes an upload (`bytes`, which the client says are `declared`) on
    /// the pool, in `caller`'s line; `completion` gets the image to keep, or why it was refused.
    /// - Returns: false when the pool is full (nothing was done).
    /// `verbatim`: the bytes are kept as they are, once checked and decoded whole (an
    /// original from another catalog, whose name is their hash).
    func normalize(
        _ bytes: [UInt8], declared: ImageFormat, verbatim: Bool = false, for caller: String,
        completion: @escaping @Sendable (Result<NormalizedImage, any Error>) -> Void
    ) -> Bool {
        pool.submit(for: caller) {
            completion(
                self.logged(
                    Result {
                        try ImagePipeline.requireStarted()
                        return verbatim ? try ImagePipeline.verify(bytes, declared: declared) : try ImagePipeline.normalize(bytes, declared: declared)
                    }))
        }
    }

    /// Keeps `image` in the media store (once it is recorded), on the pool in `caller`'s line.
    /// - Returns: false when the pool is full (nothing was done).
    func keep(_ image: NormalizedImage, for caller: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) -> Bool {
        pool.submit(for: caller) { [self] in
            completion(
                logged(
                    Result {
                        try store.put(MediaKey.original(image.hash), image.bytes)
                        cache.put(Self.key(image.hash, nil), image.bytes)
                    }))
        }
    }

    /// Whether the rendition `spec` of the image `hash` (its original when `nil`) is cached,
    /// on disk or in memory: serving it costs no decoding.
    func isCached(_ hash: String, _ spec: RenditionSpec?) -> Bool {
        cache.contains(Self.key(hash, spec))
    }

    /// The rendition `spec` of the image `hash` (its original when `nil`) when memory holds
    /// it: what an event loop may serve.
    func cached(_ hash: String, _ spec: RenditionSpec?) -> Served? {
        guard let bytes = cache.cached(Self.key(hash, spec)), let format = spec?.format ?? ImageFormat.sniff(bytes) else { return nil }
        return Served(bytes: bytes, format: format)
    }

    /// The rendition `spec` of the image `hash` (its original when `nil`), from the cache
    /// or made on the pool in `caller`'s line; one making serves every request for it that
    /// arrives meanwhile. `nil` in the completion: no such image.
    func rendition(_ hash: String, _ spec: RenditionSpec?, for caller: String, completion: @escaping @Sendable (Result<Served?, any Error>) -> Void) {
        let key = Self.key(hash, spec)
        let leads = flights.withLock { flights in
            let leads = flights[key] == nil
            flights[key, default: []].append { result in
                switch result {
                case let .success(served): completion(.success(served))
                case let .failure(error as Missing): completion(error.hash == hash ? .success(nil) : .failure(error))
                case let .failure(error): completion(.failure(error))
                }
            }
            return leads
        }
        guard leads else { return }
        let queued = pool.submit(for: caller) { [self] in land(key, logged(Result { try make(hash, spec, key) })) }
        if !queued { land(key, .failure(WorkPool.busy)) }
    }

    /// `result`, its failure logged when it is the server's (the media store, libvips):
    /// the client is told only that it may retry.
    private func logged<T>(_ result: Result<T, any Error>) -> Result<T, any Error> {
        if case let .failure(error as MediaStoreError) = result { logger.error("Images: \(error)") }
        return result
    }

    /// An image that is not stored.
    private struct Missing: Error {
        let hash: String
    }

    private func make(_ hash: String, _ spec: RenditionSpec?, _ key: String) throws -> Served {
        if let bytes = cache.get(key), let format = spec?.format ?? ImageFormat.sniff(bytes) { return Served(bytes: bytes, format: format) }
        let originalKey = Self.key(hash, nil)
        var original = cache.get(originalKey)
        if original == nil {
            guard let fetched = try store.get(MediaKey.original(hash), limit: ImageRules.maxBytes * 4) else { throw Missing(hash: hash) }
            cache.put(originalKey, fetched)
            original = fetched
        }
        guard let original, let format = ImageFormat.sniff(original) else { throw Missing(hash: hash) }
        guard let spec else { return Served(bytes: original, format: format) }
        try ImagePipeline.requireStarted()
        let rendition: (bytes: [UInt8], width: Int, height: Int)
        do {
            rendition = try ImagePipeline.render(original, format: format, spec)
        } catch {
            // A kept original that does not render is the server's failure, not the client's.
            throw MediaStoreError("libvips could not make \(spec.name) of \(hash): \(error)")
        }
        made.add(1, ordering: .relaxed)
        cache.put(key, rendition.bytes)
        return Served(bytes: rendition.bytes, format: spec.format)
    }

    /// Answers every request waiting for `key`.
    private func land(_ key: String, _ result: Result<Served, any Error>) {
        let waiting = flights.withLock { $0.removeValue(forKey: key) } ?? []
        for answer in waiting { answer(result) }
    }

    /// The cache key of a rendition (`original` for the original).
    static func key(_ hash: String, _ spec: RenditionSpec?) -> String {
        hash + "/" + (spec?.name ?? "original")
    }
}
