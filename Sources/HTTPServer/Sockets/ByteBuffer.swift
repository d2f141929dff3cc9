#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A growable byte buffer with separate read and write positions, owned by one event loop.
///
/// Bytes in `readerIndex..<writerIndex` are readable. Space is reclaimed by moving the
/// readable bytes to the front, so positions relative to `readerIndex` stay valid.
///
/// An output buffer may also hold arrays spliced in between its bytes (``append(splicing:)``):
/// a large body is sent from the array it was rendered into, by one gathered write with
/// the head before it (``withVectors(_:)``), rather than copied into the buffer first.
final class ByteBuffer {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var capacity: Int
    private(set) var readerIndex = 0
    private(set) var writerIndex = 0
    private let initialCapacity: Int

    /// An array sent after the buffer's bytes before `at` and before those from `at` on.
    private struct Splice {
        var at: Int
        let bytes: [UInt8]
        var sent = 0
    }

    /// In order of `at`, each within `readerIndex...writerIndex`.
    private var splices: [Splice] = []
    /// The bytes of `splices` not yet read.
    private var splicedCount = 0

    /// The most spliced arrays one gathered write takes (``withVectors(_:)``); the rest go
    /// in the next (a client pipelining this many large answers at once).
    static let maxSplicesPerWrite = 16

    init(capacity: Int) {
        initialCapacity = capacity
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// The readable bytes, spliced arrays included.
    var readableCount: Int { writerIndex - readerIndex + splicedCount }
    var isEmpty: Bool { readerIndex == writerIndex && splicedCount == 0 }
    /// Whether arrays are spliced in (``append(splicing:)``): the bytes then leave by ``withVectors(_:)``, not ``readable``.
    var holdsSplices: Bool { splicedCount > 0 }

    /// The readable bytes before the first spliced array (all of them in a buffer that
    /// splices nothing: one read as input, or written through TLS). Valid until the next mutation.
    var readable: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: base + readerIndex, count: (splicedCount > 0 ? splices[0].at : writerIndex) - readerIndex)
    }

    /// Marks the next `count` readable bytes read, spliced arrays included.
    func moveReader(by count: Int) {
        var count = count
        while count > 0, splicedCount > 0 {
            var first = splices[0]
            let before = min(count, first.at - readerIndex)
            readerIndex += before
            count -= before
            guard count > 0 else { break }
            let taken = min(count, first.bytes.count - first.sent)
            first.sent += taken
            count -= taken
            splicedCount -= taken
            if first.sent == first.bytes.count { splices.removeFirst() } else { splices[0] = first }
        }
        readerIndex += count
        if readerIndex == writerIndex {
            // Arrays still spliced sit at the end: they move to the front with it.
            if splicedCount > 0 { for index in splices.indices { splices[index].at = 0 } }
            readerIndex = 0
            writerIndex = 0
        }
    }

    func clear() {
        readerIndex = 0
        writerIndex = 0
        if splicedCount > 0 {
            splices.removeAll()
            splicedCount = 0
        }
    }

    /// Queues `bytes` after everything appended so far, without copying them: they are
    /// read from the array itself (``withVectors(_:)``; ``readable`` stops before them).
    /// An array holding more than twice its bytes' room, and 4 KiB more (a compressed
    /// copy in a buffer made for the worst case), is copied instead: the high-water mark
    /// counts bytes, and must bound what a connection holds.
    func append(splicing bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        guard bytes.capacity <= 2 * bytes.count + 4_096 else { return append(bytes) }
        splices.append(Splice(at: writerIndex, bytes: bytes))
        splicedCount += bytes.count
    }

    /// Calls `body` with the readable bytes as consecutive pieces for a gathered write
    /// (`sendmsg`): the buffer's own bytes and the arrays spliced between them, up to
    /// ``maxSplicesPerWrite`` arrays. Valid only during `body`.
    func withVectors<Result>(_ body: (UnsafeBufferPointer<iovec>) -> Result) -> Result {
        let splicing = min(splices.count, Self.maxSplicesPerWrite)
        return withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2 * splicing + 1) { vectors in
            gather(splice: 0, of: splicing, from: readerIndex, into: vectors, count: 0, body)
        }
    }

    /// Fills `vectors` from `count` on with the buffer's bytes from `from` to the next
    /// splice, then that splice's unsent bytes (each array's storage borrowed for as
    /// long as `body` runs), and so on for `splicing` splices.
    private func gather<Result>(
        splice: Int, of splicing: Int, from: Int, into vectors: UnsafeMutableBufferPointer<iovec>, count: Int,
        _ body: (UnsafeBufferPointer<iovec>) -> Result
    ) -> Result {
        var count = count
        let end = splice < splices.count ? splices[splice].at : writerIndex
        if end > from {
            vectors[count] = iovec(iov_base: UnsafeMutableRawPointer(base + from), iov_len: end - from)
            count += 1
        }
        guard splice < splicing else { return body(UnsafeBufferPointer(rebasing: vectors[..<count])) }
        let sent = splices[splice].sent
        return splices[splice].bytes.withUnsafeBytes { bytes in
            if let start = bytes.baseAddress {
                vectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: start + sent), iov_len: bytes.count - sent)
                count += 1
            }
            return gather(splice: splice + 1, of: splicing, from: end, into: vectors, count: count, body)
        }
    }

    /// Makes room for at least `count` more bytes after `writerIndex`.
    func reserveWritable(_ count: Int) {
        if capacity - writerIndex >= count { return }
        if readerIndex > 0 {
            let readable = writerIndex - readerIndex
            if readable > 0 { memmove(base, base + readerIndex, readable) }
            if splicedCount > 0 { for index in splices.indices { splices[index].at -= readerIndex } }
            readerIndex = 0
            writerIndex = readable
            if capacity - writerIndex >= count { return }
        }
        var newCapacity = capacity * 2
        while newCapacity - writerIndex < count { newCapacity *= 2 }
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: writerIndex)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// Returns memory to its initial size once the buffer is empty, keeping idle
    /// connections small after a large request or response.
    func shrinkIfEmpty() {
        guard isEmpty, capacity > initialCapacity * 4 else { return }
        base.deallocate()
        base = .allocate(capacity: initialCapacity)
        capacity = initialCapacity
    }

    /// The writable space after `writerIndex`; call `didWrite` with how much was filled.
    var writableSpace: UnsafeMutableBufferPointer<UInt8> {
        UnsafeMutableBufferPointer(start: base + writerIndex, count: capacity - writerIndex)
    }

    func didWrite(_ count: Int) { writerIndex += count }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, let source = bytes.baseAddress else { return }
        reserveWritable(bytes.count)
        (base + writerIndex).update(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        writerIndex += bytes.count
    }

    func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    func append(_ string: String) {
        var string = string
        string.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    func append(byte: UInt8) {
        reserveWritable(1)
        base[writerIndex] = byte
        writerIndex += 1
    }

    /// Appends `value` in decimal.
    func append(decimal value: Int) {
        reserveWritable(20)
        if value == 0 {
            base[writerIndex] = UInt8(ascii: "0")
            writerIndex += 1
            return
        }
        var digits = 0
        var remaining = value
        while remaining > 0 { digits += 1; remaining /= 10 }
        remaining = value
        for offset in stride(from: digits - 1, through: 0, by: -1) {
            base[writerIndex + offset] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
        }
        writerIndex += digits
    }
}
