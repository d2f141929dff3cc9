import CImage
import CatalogModels

/// Artwork the demo catalog makes for itself from each title (no third-party picture): a
/// diagonal gradient between two colours and a few discs, placed and coloured by the
/// title's hash, so each title always gets the same picture.
package enum DemoArtwork {
    /// A JPEG of `width` × `height` for `title`.
    package static func jpeg(for title: String, width: Int, height: Int) throws(ImageRefusal) -> [UInt8] {
        var generator = Generator(seed: title)
        let from = generator.color(lightness: 0.35), to = generator.color(lightness: 0.7)
        let palette = (0..<3).flatMap { _ in generator.color(lightness: 0.85) }
        let shortest = min(width, height)
        let circles = (0..<5).flatMap { index in
            [generator.next() % width, generator.next() % height, shortest / 10 + generator.next() % max(1, shortest / 3), index]
        }.map(Int32.init)
        var output: UnsafeMutableRawPointer?
        var length = 0
        let status = circles.withUnsafeBufferPointer { circles in
            palette.withUnsafeBufferPointer { palette in
                cimage_artwork(
                    Int32(width), Int32(height), from, to, circles.baseAddress, Int32(circles.count / 4), palette.baseAddress, Int32(palette.count / 3),
                    &output, &length)
            }
        }
        guard status == 0, let output else {
            ImagePipeline.clearError()
            throw .undecodable
        }
        defer { cimage_free(output) }
        return Array(UnsafeRawBufferPointer(start: output, count: length))
    }

    /// Numbers from a title: FNV-1a, then xorshift.
    private struct Generator {
        var state: UInt64

        init(seed: String) {
            state = seed.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
            if state == 0 { state = 1 }
        }

        mutating func next() -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % 1_000_003)
        }

        /// A saturated colour of a hue drawn from the title, at `lightness` (0…1).
        mutating func color(lightness: Double) -> [UInt8] {
            let hue = Double(next() % 360) / 60
            let chroma = 0.6, x = chroma * (1 - abs(hue.truncatingRemainder(dividingBy: 2) - 1))
            let (r, g, b): (Double, Double, Double) =
                switch Int(hue) {
                case 0: (chroma, x, 0)
                case 1: (x, chroma, 0)
                case 2: (0, chroma, x)
                case 3: (0, x, chroma)
                case 4: (x, 0, chroma)
                default: (chroma, 0, x)
                }
            let base = lightness - chroma / 2
            return [r, g, b].map { UInt8(max(0, min(255, ($0 + base) * 255))) }
        }
    }
}
