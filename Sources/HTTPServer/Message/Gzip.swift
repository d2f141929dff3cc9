import CZlib
import Foundation
import Synchronization

/// The gzip content coding (RFC 9110 §8.4.1.3) for response bodies: whether a request
/// accepts it, the coding itself (zlib), and the compressed copies of bodies sent before,
/// so that a body answered again (a cached page, the contract) is compressed once.
public enum Gzip {
    /// Whether `Accept-Encoding` field values accept gzip: `gzip` (or `x-gzip`) listed with
    /// a weight above 0, or else `*` listed so. No field, or a malformed weight, accepts nothing.
    public static func isAccepted(_ fields: [String]) -> Bool {
        var gzip: Bool?
        var any: Bool?
        for field in fields {
            for element in field.split(separator: ",") {
                let parts = element.split(separator: ";", omittingEmptySubsequences: false)
                let coding = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
                var weight: Double? = 1
                for parameter in parts.dropFirst() {
                    let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                    guard pair.count == 2, pair[0].lowercased() == "q" else { continue }
                    weight = Self.weight(pair[1])
                }
                guard let weight else { continue }
                if coding == "gzip" || coding == "x-gzip" {
                    gzip = weight > 0
                } else if coding == "*" {
                    any = weight > 0
                }
            }
        }
        return gzip ?? any ?? false
    }

    /// A weight (`qvalue`: `0` to `1` with at most three decimals); `nil` when malformed.
    private static func weight(_ text: String) -> Double? {
        let digits = text.utf8
        guard let first = digits.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1"), digits.count <= 5 else { return nil }
        guard digits.count > 1 else { return Double(text) }
        guard digits.dropFirst().first == UInt8(ascii: "."), digits.dropFirst(2).allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let value = Double(text), value <= 1
        else { return nil }
        return value
    }

    /// `bytes` in gzip at `level` (1 fastest to 9 smallest), on the calling thread's deflate
    /// state; `nil` when zlib fails.
    public static func compress(_ bytes: [UInt8], level: Int32) -> [UInt8]? {
        let capacity = czlib_gzip_bound(bytes.count)
        let compressed = [UInt8](unsafeUninitializedCapacity: capacity) { output, count in
            count = bytes.withUnsafeBufferPointer { input in
                czlib_gzip(input.baseAddress, input.count, output.baseAddress, capacity, level)
            }
        }
        return compressed.isEmpty ? nil : compressed
    }

    /// `bytes` decoded from gzip when they are whole, valid gzip of at most `limit` bytes.
    public static func decompress(_ bytes: [UInt8], limit: Int) -> [UInt8]? {
        var failed = false
        let decoded = [UInt8](unsafeUninitializedCapacity: limit) { output, count in
            let written = bytes.withUnsafeBufferPointer { input in czlib_gunzip(input.baseAddress, input.count, output.baseAddress, limit) }
            failed = written < 0
            count = max(0, written)
        }
        return failed ? nil : decoded
    }
}

/// Bodies sent before, beside their gzip: a body asked for again comes out of here, not
/// out of zlib. Keyed by a 64-bit digest of the body and checked byte for byte (the
/// digest alone is not a proof), bounded in entries and in bytes (both copies counted;
/// a body taking over an eighth of them is not kept): when either is full it starts over.
public final class CompressedCopies: Sendable {
    private struct Entry {
        let identity: [UInt8]
        let gzip: [UInt8]
    }

    private struct Entries {
        var byDigest: [UInt64: Entry] = [:]
        var bytes = 0
    }

    private let entries = Mutex(Entries())
    private let capacity: Int
    private let maxBytes: Int
    /// The compression level of every copy.
    let level: Int32

    /// Copies of at most `capacity` bodies holding at most `maxBytes`, compressed at `level`.
    public init(capacity: Int = 1_024, maxBytes: Int = 4 << 20, level: Int32 = 4) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.level = level
    }

    /// Whether the gzip of `body`, whose digest is `digest`, is kept.
    public func holds(_ body: [UInt8], digest: UInt64) -> Bool {
        entries.withLock { entries in entries.byDigest[digest].map { Self.same($0.identity, body) } ?? false }
    }

    /// The gzip of `body`, whose digest is `digest`: kept from before, or made now and kept.
    /// `nil` when zlib fails.
    public func gzip(_ body: [UInt8], digest: UInt64) -> [UInt8]? {
        let found = entries.withLock { entries -> [UInt8]? in
            guard let entry = entries.byDigest[digest], Self.same(entry.identity, body) else { return nil }
            return entry.gzip
        }
        if let found { return found }
        guard let compressed = Gzip.compress(body, level: level) else { return nil }
        let bytes = body.count + compressed.count
        entries.withLock { entries in
            guard bytes <= maxBytes / 8 else { return }
            if entries.byDigest.count >= capacity || entries.bytes + bytes > maxBytes {
                entries.byDigest.removeAll(keepingCapacity: true)
                entries.bytes = 0
            }
            if let old = entries.byDigest.updateValue(Entry(identity: body, gzip: compressed), forKey: digest) {
                entries.bytes -= old.identity.count + old.gzip.count
            }
            entries.bytes += bytes
        }
        return compressed
    }

    /// Whether two bodies hold the same bytes.
    private static func same(_ left: [UInt8], _ right: [UInt8]) -> Bool {
        left.count == right.count
            && left.withUnsafeBytes { left in
                right.withUnsafeBytes { right in
                    guard let a = left.baseAddress, let b = right.baseAddress else { return true }
                    return a == b || memcmp(a, b, left.count) == 0
                }
            }
    }
}
