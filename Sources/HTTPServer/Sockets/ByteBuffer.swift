#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A growable byte buffer with separate read and write positions, owned by one event loop.
///
/// Bytes in `readerIndex..<writerIndex` are readable. Space is reclaimed by moving the
/// readable bytes to the front, so positions relative to `readerIndex` stay valid.
final class ByteBuffer {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var capacity: Int
    private(set) var readerIndex = 0
    private(set) var writerIndex = 0
    private let initialCapacity: Int

    init(capacity: Int) {
        initialCapacity = capacity
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    var readableCount: Int { writerIndex - readerIndex }
    var isEmpty: Bool { readerIndex == writerIndex }

    /// The readable bytes. Valid until the next mutation.
    var readable: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: base + readerIndex, count: writerIndex - readerIndex)
    }

    func moveReader(by count: Int) {
        readerIndex += count
        if readerIndex == writerIndex {
            readerIndex = 0
            writerIndex = 0
        }
    }

    func clear() {
        readerIndex = 0
        writerIndex = 0
    }

    /// Makes room for at least `count` more bytes after `writerIndex`.
    func reserveWritable(_ count: Int) {
        if capacity - writerIndex >= count { return }
        if readerIndex > 0 {
            let readable = writerIndex - readerIndex
            if readable > 0 { memmove(base, base + readerIndex, readable) }
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
