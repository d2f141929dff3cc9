import CImage
import CatalogIdentity
import CatalogModels
import Foundation

/// Why an upload is refused: each is the client's mistake, never the server's.
package enum ImageRefusal: Error, Sendable, Equatable {
    /// More bytes than ``ImageRules/maxBytes``.
    case tooLarge(bytes: Int)
    /// Not one of the accepted formats, told from its bytes (SVG, GIF, HTML, …).
    case unsupported
    /// The bytes are one format, the `Content-Type` says another.
    case mismatched(declared: ImageFormat, actual: ImageFormat)
    /// More pixels than ``ImageRules/maxPixels``, a side over ``ImageRules/maxSide``, or
    /// more than ``ImageRules/maxDecodedBytes`` decoded, as its header says.
    case tooManyPixels(width: Int, height: Int)
    /// More than ``ImageRules/maxBytes`` once kept (upright, sRGB, without metadata).
    case tooLargeOnceKept(bytes: Int)
    /// Truncated or corrupt: its decoder gave up.
    case undecodable
}

/// An upload made ready to keep: upright, in sRGB, without metadata (EXIF, GPS, XMP,
/// comments, anything after the picture), in its own format, with what documents show of it.
package struct NormalizedImage: Sendable {
    package let bytes: [UInt8]
    package let format: ImageFormat
    package let width: Int
    package let height: Int
    package let blurHash: String
    /// The SHA-256 of ``bytes``, in lowercase hex: the image's name everywhere.
    package let hash: String
}

/// What a request for a rendition asks for (`GET /v1/images/{hash}?w=&h=&fit=&format=&q=`).
package struct RenditionSpec: Sendable, Hashable {
    package let width: Int?
    package let height: Int?
    package let fit: ImageFit
    package let format: ImageFormat
    package let quality: Int
    /// A name unique to the rendition, safe as a file name: `w640-h0-contain-q80.webp`
    /// (made once: it keys the cache and tags the answer of every request).
    package let name: String

    package init(width: Int?, height: Int?, fit: ImageFit, format: ImageFormat, quality: Int) {
        self.width = width
        self.height = height
        self.fit = fit
        self.format = format
        self.quality = quality
        var name = "w" + String(width ?? 0)
        name += "-h" + String(height ?? 0)
        name += "-" + fit.rawValue + "-q" + String(quality) + "." + format.rawValue
        self.name = name
    }
}

/// The image work, on libvips (through CImage): every call blocks its thread for as long
/// as decoding and encoding take, so callers run it on a pool, never on an event loop.
package enum ImagePipeline {
    /// The side of the picture a BlurHash is computed from.
    static let blurSide = 32
    /// The quality originals are kept at, by format.
    static func keptQuality(_ format: ImageFormat) -> Int {
        switch format {
        case .jpeg, .webp: 90
        case .png: 100
        case .heic, .avif: 80
        }
    }

    /// Loads and starts libvips (once, at the first image worked on: a server that shows no
    /// image never maps it); false when it cannot.
    package static func start() -> Bool { cimage_start() == 0 }

    /// Loads libvips, or says why it cannot be (the server's fault, never the client's).
    package static func requireStarted() throws(MediaStoreError) {
        guard start() else { throw MediaStoreError("libvips cannot be loaded: \(clearError())") }
    }

    /// The format of `bytes`, checked against what the client said it is (`declared`),
    /// and its upright size from its header: refused before anything is decoded.
    package static func inspect(_ bytes: [UInt8], declared: ImageFormat) throws(ImageRefusal) -> (format: ImageFormat, width: Int, height: Int) {
        guard bytes.count <= ImageRules.maxBytes else { throw .tooLarge(bytes: bytes.count) }
        guard let format = ImageFormat.sniff(bytes) else { throw .unsupported }
        guard format == declared else { throw .mismatched(declared: declared, actual: format) }
        var width: Int32 = 0, height: Int32 = 0, bands: Int32 = 0, sampleBytes: Int32 = 0
        let read = bytes.withUnsafeBytes { cimage_header($0.baseAddress, $0.count, format.cFormat, &width, &height, &bands, &sampleBytes) }
        guard read == 0, width > 0, height > 0 else {
            clearError()
            throw .undecodable
        }
        let pixels = Int(width) * Int(height)
        guard pixels <= ImageRules.maxPixels, max(width, height) <= ImageRules.maxSide,
            pixels * Int(max(1, bands)) * Int(max(1, sampleBytes)) <= ImageRules.maxDecodedBytes
        else { throw .tooManyPixels(width: Int(width), height: Int(height)) }
        return (format, Int(width), Int(height))
    }

    /// `bytes` (an upload the client says is `declared`) checked and made ready to keep.
    package static func normalize(_ bytes: [UInt8], declared: ImageFormat) throws(ImageRefusal) -> NormalizedImage {
        let (format, width, height) = try inspect(bytes, declared: declared)
        let spec = RenditionSpec(width: width, height: height, fit: .contain, format: format, quality: keptQuality(format))
        let kept = try render(bytes, format: format, spec)
        guard kept.bytes.count <= ImageRules.maxBytes else { throw .tooLargeOnceKept(bytes: kept.bytes.count) }
        return try describe(kept.bytes, format: format, width: kept.width, height: kept.height)
    }

    /// `bytes`, an original kept by a catalog (an export's), checked as an upload is and
    /// decoded whole, to keep as they are (their hash is their name already).
    package static func verify(_ bytes: [UInt8], declared: ImageFormat) throws(ImageRefusal) -> NormalizedImage {
        let (format, width, height) = try inspect(bytes, declared: declared)
        return try describe(bytes, format: format, width: width, height: height)
    }

    /// `kept` described: its BlurHash (from a picture at most ``blurSide`` wide, which
    /// decodes it whole) and its hash.
    private static func describe(_ kept: [UInt8], format: ImageFormat, width: Int, height: Int) throws(ImageRefusal) -> NormalizedImage {
        var pixels = [UInt8](repeating: 0, count: blurSide * blurSide * 3)
        var blurWidth: Int32 = 0, blurHeight: Int32 = 0
        let shrunk = kept.withUnsafeBytes { kept in
            pixels.withUnsafeMutableBufferPointer { pixels in
                cimage_pixels(kept.baseAddress, kept.count, format.cFormat, Int32(blurSide), pixels.baseAddress, &blurWidth, &blurHeight)
            }
        }
        guard shrunk == 0, blurWidth > 0, blurHeight > 0 else {
            clearError()
            throw .undecodable
        }
        let components = BlurHash.components(width: width, height: height)
        let blurHash = BlurHash.encode(pixels: pixels, width: Int(blurWidth), height: Int(blurHeight), x: components.x, y: components.y)
        return NormalizedImage(bytes: kept, format: format, width: width, height: height, blurHash: blurHash, hash: Crypto.hex(Crypto.sha256(kept)))
    }

    /// A rendition of `original` (a kept image of `format`) as `spec` asks.
    package static func render(_ original: [UInt8], format: ImageFormat, _ spec: RenditionSpec) throws(ImageRefusal) -> (bytes: [UInt8], width: Int, height: Int) {
        // Without a bound, a side is limited by the other (libvips' largest coordinate).
        let unbounded: Int32 = 10_000_000
        var output: UnsafeMutableRawPointer?
        var length = 0
        var width: Int32 = 0, height: Int32 = 0
        let status = original.withUnsafeBytes { input in
            cimage_render(
                input.baseAddress, input.count, format.cFormat, spec.width.map(Int32.init) ?? unbounded, spec.height.map(Int32.init) ?? unbounded,
                spec.fit == .cover && spec.width != nil && spec.height != nil ? 1 : 0, spec.format.cFormat, Int32(spec.quality), &output, &length,
                &width, &height)
        }
        guard status == 0, let output else {
            clearError()
            throw .undecodable
        }
        defer { cimage_free(output) }
        return (Array(UnsafeRawBufferPointer(start: output, count: length)), Int(width), Int(height))
    }

    /// The last libvips error, taken (so it does not pile up in libvips' buffer).
    @discardableResult
    package static func clearError() -> String {
        guard let message = cimage_error() else { return "" }
        defer { free(message) }
        return String(cString: message)
    }
}
