import Foundation

/// BlurHash (<https://github.com/woltapp/blurhash>, its reference algorithm): a few
/// cosine components of a picture, in base 83, that a client decodes into a blurred
/// placeholder. Computed at upload from a picture of at most 32 × 32 pixels.
package enum BlurHash {
    /// The hash of `pixels` (sRGB, 3 bytes a pixel, `width` × `height`), with `x` × `y`
    /// components (each 1…9).
    package static func encode(pixels: [UInt8], width: Int, height: Int, x: Int, y: Int) -> String {
        precondition((1...9).contains(x) && (1...9).contains(y) && pixels.count >= width * height * 3)
        var factors: [(Double, Double, Double)] = []
        for j in 0..<y {
            for i in 0..<x {
                let normalisation = (i == 0 && j == 0) ? 1.0 : 2.0
                var r = 0.0, g = 0.0, b = 0.0
                for py in 0..<height {
                    let cosY = cos(Double.pi * Double(j) * Double(py) / Double(height))
                    for px in 0..<width {
                        let basis = normalisation * cos(Double.pi * Double(i) * Double(px) / Double(width)) * cosY
                        let offset = 3 * (px + py * width)
                        r += basis * linear(pixels[offset])
                        g += basis * linear(pixels[offset + 1])
                        b += basis * linear(pixels[offset + 2])
                    }
                }
                let scale = 1.0 / Double(width * height)
                factors.append((r * scale, g * scale, b * scale))
            }
        }
        let dc = factors[0]
        let ac = factors.dropFirst()
        var hash = base83((x - 1) + (y - 1) * 9, length: 1)
        let maximum: Double
        if let largest = ac.map({ max(abs($0.0), abs($0.1), abs($0.2)) }).max() {
            let quantised = max(0, min(82, Int((largest * 166 - 0.5).rounded(.down))))
            maximum = Double(quantised + 1) / 166
            hash += base83(quantised, length: 1)
        } else {
            maximum = 1
            hash += base83(0, length: 1)
        }
        hash += base83((sRGB(dc.0) << 16) + (sRGB(dc.1) << 8) + sRGB(dc.2), length: 4)
        for factor in ac {
            func quantise(_ value: Double) -> Int {
                max(0, min(18, Int((signPow(value / maximum, 0.5) * 9 + 9.5).rounded(.down))))
            }
            hash += base83(quantise(factor.0) * 19 * 19 + quantise(factor.1) * 19 + quantise(factor.2), length: 2)
        }
        return hash
    }

    /// The components for a picture of `width` × `height`: 4 along its longer side, 3 along the other.
    package static func components(width: Int, height: Int) -> (x: Int, y: Int) {
        width >= height ? (4, 3) : (3, 4)
    }

    private static func linear(_ value: UInt8) -> Double {
        let v = Double(value) / 255
        return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    private static func sRGB(_ value: Double) -> Int {
        let v = max(0, min(1, value))
        return v <= 0.0031308 ? Int(v * 12.92 * 255 + 0.5) : Int((1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5)
    }

    private static func signPow(_ value: Double, _ exponent: Double) -> Double {
        (value < 0 ? -1 : 1) * pow(abs(value), exponent)
    }

    private static let characters = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~")

    private static func base83(_ value: Int, length: Int) -> String {
        var result = ""
        for index in 1...length {
            var divisor = 1
            for _ in 0..<(length - index) { divisor *= 83 }
            result.append(characters[(value / divisor) % 83])
        }
        return result
    }
}
