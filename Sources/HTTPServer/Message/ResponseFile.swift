#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An open file, or a byte range of one, to send as a response's body
/// (``HTTPResponse/file``). Its descriptor is closed when the last response holding it
/// (or a part of it) is done, so a file removed meanwhile is still sent whole.
public final class ResponseFile: Sendable {
    /// Owns the open descriptor, shared by the file and its parts.
    private final class Descriptor: Sendable {
        let value: Int32
        init(_ value: Int32) { self.value = value }
        deinit { Glibc.close(value) }
    }

    private let owner: Descriptor
    /// The open descriptor (read-only).
    public var descriptor: Int32 { owner.value }
    /// The first byte to send.
    public let offset: Int
    /// How many bytes to send.
    public let count: Int
    /// The whole file's size.
    public let size: Int
    /// When the file was last modified (seconds since 1970).
    public let modified: Int
    /// Its device and inode, mixed: another file under the same name differs.
    public let identity: UInt64

    private init(owner: Descriptor, offset: Int, count: Int, size: Int, modified: Int, identity: UInt64) {
        self.owner = owner
        self.offset = offset
        self.count = count
        self.size = size
        self.modified = modified
        self.identity = identity
    }

    /// The whole file at `path`, open; `nil` when there is no regular file there.
    /// - Throws: ``SystemError`` when it exists but cannot be opened or examined.
    public static func open(_ path: String) throws(SystemError) -> ResponseFile? {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw SystemError("open")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let error = SystemError("fstat")
            Glibc.close(descriptor)
            throw error
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(descriptor)
            return nil
        }
        let size = Int(status.st_size)
        return ResponseFile(
            owner: Descriptor(descriptor), offset: 0, count: size, size: size, modified: Int(status.st_mtim.tv_sec),
            identity: UInt64(status.st_ino) &* 31 &+ UInt64(status.st_dev))
    }

    /// The bytes `range` of the same open file (within ``size``), sharing its descriptor.
    public func part(_ range: Range<Int>) -> ResponseFile {
        precondition(range.lowerBound >= 0 && range.upperBound <= size, "a part outside the file")
        return ResponseFile(owner: owner, offset: range.lowerBound, count: range.count, size: size, modified: modified, identity: identity)
    }
}

/// A response's file on its way to the socket.
struct FileTransfer {
    let file: ResponseFile
    /// The next byte's offset in the file.
    var next: Int
    /// How many bytes are left.
    var remaining: Int

    init(_ file: ResponseFile) {
        self.file = file
        next = file.offset
        remaining = file.count
    }
}
