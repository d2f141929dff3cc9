import CImage
import CatalogModels

extension ImageFormat {
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
