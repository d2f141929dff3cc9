import CImage
import CatalogModels

extension ImageFormat {
    /// The format the bytes of `data` are, told from their first bytes (their "magic"),
    /// never from what a client says; `nil` for anything else (SVG, GIF, TIFF, HTML, …).
    package static func sniff(_ data: some RandomAccessCollection<UInt8>) -> ImageFormat? {
        let head = Array(data.prefix(64))
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + bytes.count && Array(head[offset..<(offset + bytes.count)]) == bytes
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(Array("RIFF".utf8)), starts(Array("WEBP".utf8), at: 8) { return .webp }
        // ISO base media (HEIF): a `ftyp` box whose brands say HEIC or AVIF.
        guard starts(Array("ftyp".utf8), at: 4), head.count >= 16 else { return nil }
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

    /// Its number in the C interface.
    var cFormat: cimage_format {
        switch self {
        case .jpeg: CIMAGE_JPEG
        case .png: CIMAGE_PNG
        case .webp: CIMAGE_WEBP
        case .heic: CIMAGE_HEIC
        case .avif: CIMAGE_AVIF
        }
    }
}
