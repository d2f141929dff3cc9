import CZlib
import Foundation
import Synchronization

/// The gzip content coding (RFC 9110 §8.4.1.3) for response bodies: whether a request
/// accepts it, the coding itself (zlib), and the compressed copies of bodies sent before,
/// so that a body answered again (a cached page, the contract) is compressed once.
public enum Gzip {
    /// Whether `Accept-Encoding` field values accept gzip: `gzip` (or `x-gzip`) listed with
    /// a weight above 0, or else `*` listed so. No field, or a malformed weight, accepts nothing.
    /// Read byte by byte, without a string made (URLSession sends the field on every request).
    public static func isAccepted(_ fields: [String]) -> Bool {
        var gzip: Bool?
        var any: Bool?
        for field in fields {
            var field = field
            field.withUTF8 { bytes in
                var start = 0
                while start <= bytes.count {
                    var end = start
                    while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
                    if let (coding, weight) = element(UnsafeBufferPointer(rebasing: bytes[start..<end])) {
                        switch coding {
                        case .gzip: gzip = weight
                        case .any: any = weight
                        case .other: break
                        }
                    }
                    start = end + 1
                }
            }
        }
        return gzip ?? any ?? false
    }

    private enum Coding { case gzip, any, other }

    /// One element of the list: its coding and whether its weight is above 0; `nil` when
    /// empty or when its weight is malformed.
    private static func element(_ bytes: UnsafeBufferPointer<UInt8>) -> (Coding, Bool)? {
        var parts = bytes.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false).makeIterator()
        guard let name = parts.next().map(trimmed), !name.isEmpty else { return nil }
        let coding: Coding =
            ASCII.startsIgnoringCase(name, "gzip", whole: true) || ASCII.startsIgnoringCase(name, "x-gzip", whole: true)
            ? .gzip : name.elementsEqual("*".utf8) ? .any : .other
        var above = true
        while let parameter = parts.next() {
            let parameter = trimmed(parameter)
            guard parameter.count >= 2, ASCII.startsIgnoringCase(parameter, "q", whole: false) else { continue }
            var rest = trimmed(parameter.dropFirst())
            guard rest.first == UInt8(ascii: "=") else { continue }
            rest = trimmed(rest.dropFirst())
            guard let weight = weight(rest) else { return nil }
            above = weight
        }
        return (coding, above)
    }

    /// Whether a weight (`qvalue`: `0` to `1` with at most three decimals) is above 0;
    /// `nil` when malformed.
    private static func weight(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> Bool? {
        guard let first = digits.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1"), digits.count <= 5 else { return nil }
        let decimals = digits.dropFirst()
        if decimals.isEmpty { return first == UInt8(ascii: "1") }
        guard decimals.first == UInt8(ascii: "."), decimals.dropFirst().allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        if first == UInt8(ascii: "1") { return decimals.dropFirst().allSatisfy { $0 == UInt8(ascii: "0") } ? true : nil }
        return decimals.dropFirst().contains { $0 != UInt8(ascii: "0") }
    }

    private static func trimmed(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Slice<UnsafeBufferPointer<UInt8>> {
        var slice = bytes
        while let first = slice.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { slice = slice.dropFirst() }
        while let last = slice.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { slice = slice.dropLast() }
        return slice
    }

    private static func trimmed(_ bytes: UnsafeBufferPointer<UInt8>) -> Slice<UnsafeBufferPointer<UInt8>> {
        trimmed(bytes[...])
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
