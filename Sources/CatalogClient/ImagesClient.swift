import CatalogModels
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension ResourceClient where Model: ShowsImage {
    /// Sets the image of the resource `id` (a game's artwork, an item's poster, a
    /// playlist's cover, a user's avatar) to `data`, a JPEG, PNG, WebP, HEIC or AVIF image
    /// of `format` (at most ``ImageRules/maxBytes`` bytes and ``ImageRules/maxPixels``
    /// pixels); with `ifMatch`, only if the resource is still at that version. The server
    /// keeps it upright and without metadata, and answers with the resource showing it.
    public func setImage(
        of id: CatalogID, _ data: Data, format: ImageFormat, ifMatch: String? = nil
    ) async throws(CatalogClientError)
        -> Tagged<Model>
    {
        try await client.tagged(
            client.send("PUT", "\(path)/\(id)/image", body: data, contentType: format.contentType, headers: client.condition(ifMatch)))
    }

    /// Removes the image of the resource `id`; with `ifMatch`, only if the resource is still at that version.
    public func removeImage(of id: CatalogID, ifMatch: String? = nil) async throws(CatalogClientError) {
        _ = try await client.send("DELETE", "\(path)/\(id)/image", headers: client.condition(ifMatch))
    }
}

extension CatalogClient {
    /// The URL of `image` for a view `points` wide (and `heightPoints` tall, filled when
    /// `fit` is `.cover`) on a screen of `scale` (2 for `@2x`, 3 for `@3x`), in an explicit
    /// `format`: the server's answer is immutable, so `URLCache` and CDNs keep it for a year.
    public func imageURL(
        _ image: ImageReference, points: Double, heightPoints: Double? = nil, scale: Double, fit: ImageFit = .contain, format: ImageFormat = .jpeg
    ) -> URL? {
        let (path, query) = Self.split(image.path(points: points, heightPoints: heightPoints, scale: scale, fit: fit, format: format))
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)
        components?.queryItems = query
        return components?.url
    }

    /// The bytes of `image` as ``imageURL(_:points:heightPoints:scale:fit:format:)`` names
    /// them; the original's when `points` is `nil`.
    public func imageData(
        _ image: ImageReference, points: Double? = nil, heightPoints: Double? = nil, scale: Double = 1, fit: ImageFit = .contain,
        format: ImageFormat = .jpeg
    ) async throws(CatalogClientError) -> Data {
        guard let points else { return try await send("GET", image.url).data }
        let (path, query) = Self.split(image.path(points: points, heightPoints: heightPoints, scale: scale, fit: fit, format: format))
        return try await send("GET", path, query: query).data
    }

    /// A path with a query (`/v1/images/…?w=192&format=webp`) as the path and its items.
    private static func split(_ pathAndQuery: String) -> (String, [URLQueryItem]) {
        let parts = pathAndQuery.split(separator: "?", maxSplits: 1)
        let items = (parts.count > 1 ? parts[1].split(separator: "&") : []).map { pair in
            let halves = pair.split(separator: "=", maxSplits: 1)
            return URLQueryItem(name: String(halves[0]), value: halves.count > 1 ? String(halves[1]) : nil)
        }
        return (String(parts.first ?? ""), items)
    }
}
