import Foundation

/// The image a resource shows (a game's artwork, an item's poster, a user's avatar, a
/// playlist's cover), as documents carry it: where to fetch it, its size and a BlurHash to
/// show while it loads. The `url` is content-addressed (the SHA-256 of the stored
/// original), so what it names never changes.
public struct ImageReference: Codable, Sendable, Hashable {
    /// The original's path, `/v1/images/{sha256}`, relative to the server.
    public var url: String
    /// The original's width in pixels, upright.
    public var width: Int
    /// The original's height in pixels, upright.
    public var height: Int
    /// A BlurHash (<https://blurha.sh>) of the picture, made when it was uploaded.
    public var blurHash: String
    /// The original's media type, such as `image/jpeg`.
    public var contentType: String

    /// Creates an image reference.
    public init(url: String, width: Int, height: Int, blurHash: String, contentType: String) {
        self.url = url
        self.width = width
        self.height = height
        self.blurHash = blurHash
        self.contentType = contentType
    }

    /// The original's SHA-256, in lowercase hex: the last segment of ``url``.
    public var hash: String { String(url.split(separator: "/").last ?? "") }

    /// The path and query of a rendition no wider than `width` pixels (and, when given, no
    /// taller than `height`), in an explicit `format` (immutable: caches keep it for a
    /// year). The sizes are rounded up to the server's ladder (``ImageRules/widths``),
    /// where it ends, at its largest.
    public func path(width: Int, height: Int? = nil, fit: ImageFit = .contain, format: ImageFormat = .jpeg, quality: Int? = nil) -> String {
        var query = ["w=\(ImageRules.ladderWidth(atLeast: width))"]
        if let height { query.append("h=\(ImageRules.ladderWidth(atLeast: height))") }
        if fit != .contain { query.append("fit=\(fit.rawValue)") }
        query.append("format=\(format.rawValue)")
        if let quality { query.append("q=\(ImageRules.ladderQuality(atLeast: quality))") }
        return url + "?" + query.joined(separator: "&")
    }

    /// The path of a rendition for a view `points` wide (and `heightPoints` tall) on a
    /// screen of `scale` (2 for `@2x`, 3 for `@3x`).
    public func path(points: Double, heightPoints: Double? = nil, scale: Double, fit: ImageFit = .contain, format: ImageFormat = .jpeg) -> String {
        path(width: Int((points * scale).rounded(.up)), height: heightPoints.map { Int(($0 * scale).rounded(.up)) }, fit: fit, format: format)
    }
}

/// The image formats: uploads may be any of them; renditions are JPEG, WebP or AVIF.
public enum ImageFormat: String, Codable, Sendable, CaseIterable {
    case jpeg, png, webp, heic, avif

    /// Its media type.
    public var contentType: String { "image/\(rawValue)" }

    /// The format of a media type, or `nil` when it is none of these (`image/jpg` is JPEG).
    public init?(contentType: String) {
        let type = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        if type == "image/jpg" {
            self = .jpeg
            return
        }
        guard type.hasPrefix("image/"), let format = ImageFormat(rawValue: String(type.dropFirst(6))) else { return nil }
        self = format
    }

    /// The format the bytes of `data` are, told from their first bytes (their "magic"),
    /// never from what a client says; `nil` for anything else (SVG, GIF, TIFF, HTML, …).
    public static func sniff(_ data: some RandomAccessCollection<UInt8>) -> ImageFormat? {
        let head = Array(data.prefix(64))
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + bytes.count && head[offset..<(offset + bytes.count)].elementsEqual(bytes)
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts([0x52, 0x49, 0x46, 0x46]), starts([0x57, 0x45, 0x42, 0x50], at: 8) { return .webp }  // RIFF, WEBP
        // ISO base media (HEIF): a `ftyp` box whose brands say HEIC or AVIF.
        guard starts([0x66, 0x74, 0x79, 0x70], at: 4), head.count >= 16 else { return nil }  // ftyp
        let boxSize = min(head.count, Int(head[0]) << 24 | Int(head[1]) << 16 | Int(head[2]) << 8 | Int(head[3]))
        var brands: [String] = []
        var offset = 8
        while offset + 4 <= boxSize {
            if offset != 12 { brands.append(String(decoding: head[offset..<(offset + 4)], as: UTF8.self)) }
            offset += 4
        }
        if brands.contains(where: { ["avif", "avis"].contains($0) }) { return .avif }
        if brands.contains(where: { ["heic", "heix", "heim", "heis", "hevc", "hevx"].contains($0) }) { return .heic }
        return nil
    }

    /// The formats a rendition may be asked for in (`format=`).
    public static let renditions: [ImageFormat] = [.jpeg, .webp, .avif]
}

/// How a rendition asked for with both a width and a height fits them.
public enum ImageFit: String, Codable, Sendable, CaseIterable {
    /// Within both, keeping the whole picture (one side may be shorter).
    case contain
    /// Filling both, cropped about the centre.
    case cover
}

/// The limits on images, shared by the server and its clients.
public enum ImageRules {
    /// The sizes renditions come in (`w=`, `h=`): anything else is refused, so the number of
    /// renditions of an image is bounded.
    public static let widths = [64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024, 1280, 1536, 2048]
    /// The qualities renditions come in (`q=`), and the default.
    public static let qualities = [50, 60, 70, 80, 90]
    public static let defaultQuality = 80
    /// The largest upload, in bytes.
    public static let maxBytes = 20_000_000
    /// The most pixels an upload may have (read from its header, before it is decoded).
    public static let maxPixels = 40_000_000
    /// The most pixels of either side (what every rendition format can hold).
    public static let maxSide = 16_383
    /// The most bytes an upload may take once decoded (pixels × bands × bytes per sample,
    /// from its header): 40 megapixels of 8-bit RGBA; a 16-bit image may have half as many.
    public static let maxDecodedBytes = 160_000_000

    /// The smallest width of the ladder that is at least `pixels` (the largest, beyond it).
    public static func ladderWidth(atLeast pixels: Int) -> Int {
        widths.first { $0 >= pixels } ?? widths[widths.count - 1]
    }

    /// The smallest quality of the ladder that is at least `quality` (the largest, beyond it).
    public static func ladderQuality(atLeast quality: Int) -> Int {
        qualities.first { $0 >= quality } ?? qualities[qualities.count - 1]
    }
}

/// A resource that shows an image (``ImageReference``): a game's artwork, a playable
/// item's poster, a playlist's cover, a user's avatar.
public protocol ShowsImage {
    /// The image, when one is set.
    var image: ImageReference? { get }
}

extension Game: ShowsImage {}
extension PlayableItem: ShowsImage {}
extension Playlist: ShowsImage {}
extension User: ShowsImage {}
