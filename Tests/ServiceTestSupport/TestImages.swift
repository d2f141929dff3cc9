import CatalogMedia
import CatalogModels
import Foundation

/// Images made by the tests themselves, never downloaded: PNGs written byte by byte (so a
/// test may claim any size in a header), and JPEG, WebP, AVIF and HEIC made from them by
/// libvips; with hostile variants (EXIF GPS, a polyglot, a truncation).
package enum TestImages {
    /// An RGB PNG of `width` × `height` whose pixels `color` gives (a gradient by default).
    package static func png(
        width: Int, height: Int, color: (Int, Int) -> (UInt8, UInt8, UInt8) = { x, y in (UInt8(x * 255 / max(1, x + y)), UInt8(y % 256), 128) }
    ) -> [UInt8] {
        var raw: [UInt8] = []
        raw.reserveCapacity((width * 3 + 1) * height)
        for y in 0..<height {
            raw.append(0)
            for x in 0..<width {
                let (r, g, b) = color(x, y)
                raw += [r, g, b]
            }
        }
        return pngFile(width: width, height: height, data: zlibStored(raw))
    }

    /// A PNG whose header claims `width` × `height` but which holds only a few rows of data:
    /// what a decompression bomb looks like before it is inflated.
    package static func pngClaiming(width: Int, height: Int) -> [UInt8] {
        pngFile(width: width, height: height, data: zlibStored([UInt8](repeating: 0, count: 1024)))
    }

    /// `png` made into `format` by libvips (at quality 90).
    package static func image(_ format: ImageFormat, width: Int, height: Int) throws -> [UInt8] {
        let source = png(width: width, height: height)
        guard format != .png else { return source }
        _ = ImagePipeline.start()
        return try ImagePipeline.render(source, format: .png, RenditionSpec(width: nil, height: nil, fit: .contain, format: format, quality: 90)).bytes
    }

    /// `jpeg` with an EXIF segment (APP1) holding a GPS position, right after its start marker.
    package static func withGPS(_ jpeg: [UInt8]) -> [UInt8] {
        // A little-endian TIFF: IFD0 with one entry (the GPS IFD's offset), then the GPS IFD
        // with a latitude reference and a latitude of three rationals.
        var tiff: [UInt8] = Array("II".utf8) + le16(42) + le32(8)
        tiff += le16(1) + le16(0x8825) + le16(4) + le32(1) + le32(26) + le32(0)  // IFD0 → GPS IFD at 26
        tiff += le16(2)
        tiff += le16(1) + le16(2) + le32(2) + Array("N".utf8) + [0, 0, 0]  // GPSLatitudeRef "N"
        tiff += le16(2) + le16(5) + le32(3) + le32(56) + le32(0)  // GPSLatitude at 56
        tiff += le32(48) + le32(1) + le32(51) + le32(1) + le32(30) + le32(1)  // 48° 51' 30"
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let segment: [UInt8] = [0xFF, 0xE1] + be16(payload.count + 2) + payload
        return Array(jpeg.prefix(2)) + segment + jpeg.dropFirst(2)
    }

    /// A PNG that is also an HTML page: a script in a text chunk and after its end.
    package static func polyglot() -> [UInt8] {
        let html = Array("<html><body><script>alert(document.cookie)</script></body></html>".utf8)
        var image = png(width: 16, height: 16)
        let end = image.count - 12  // IEND
        image.insert(contentsOf: chunk("tEXt", Array("Comment".utf8) + [0] + html), at: end)
        return image + html
    }

    // MARK: PNG bytes

    private static func pngFile(width: Int, height: Int, data: [UInt8]) -> [UInt8] {
        let header = be32(width) + be32(height) + [8, 2, 0, 0, 0]  // 8-bit RGB
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header) + chunk("IDAT", data) + chunk("IEND", [])
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return be32(data.count) + body + be32(Int(crc32(body)))
    }

    /// `data` as a zlib stream of stored (uncompressed) deflate blocks.
    private static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65_535, data.count - offset)
            let last: UInt8 = offset + count == data.count ? 1 : 0
            out += [last] + le16(count) + le16(~count & 0xFFFF) + data[offset..<(offset + count)]
            offset += count
        } while offset < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return out + be32(Int(b << 16 | a))
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = crcTable[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    private static func be32(_ value: Int) -> [UInt8] { [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    private static func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    private static func le32(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24 & 0xFF)] }
    private static func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
}
