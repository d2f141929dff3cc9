/// A fast 64-bit digest for entity tags: not for security, only to tell a
/// representation's versions apart. Four independent multiply-xorshift lanes over
/// 32-byte blocks (so the multiplications overlap), then the tail, then a final mix.
package enum Digest {
    /// The digest of `bytes`.
    package static func of(_ bytes: [UInt8]) -> UInt64 {
        let prime: UInt64 = 0x9E37_79B9_7F4A_7C15
        var lanes: (UInt64, UInt64, UInt64, UInt64) = (0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344, 0xA409_3822_299F_31D0, 0x082E_FA98_EC4E_6C89)
        @inline(__always) func mix(_ lane: UInt64, _ word: UInt64) -> UInt64 {
            let value = (lane ^ word) &* prime
            return value ^ (value >> 32)
        }
        var tail: UInt64 = 0
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset + 32 <= raw.count {
                lanes.0 = mix(lanes.0, raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                lanes.1 = mix(lanes.1, raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
                lanes.2 = mix(lanes.2, raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self))
                lanes.3 = mix(lanes.3, raw.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self))
                offset += 32
            }
            while offset < raw.count {
                tail = mix(tail, UInt64(raw[offset]) &+ UInt64(offset))
                offset += 1
            }
        }
        // Folded one by one: an array literal of the lanes would be allocated per digest.
        return mix(mix(mix(mix(mix(UInt64(bytes.count), lanes.0), lanes.1), lanes.2), lanes.3), tail)
    }
}
