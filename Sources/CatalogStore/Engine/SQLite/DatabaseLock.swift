import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// An exclusive advisory lock (`flock`) on `<database>.lock`, held while a store has the
/// database open: a second server, or a restore, cannot open it meanwhile. The kernel
/// drops the lock when the process dies, even by `kill -9`.
final class DatabaseLock: @unchecked Sendable {
    private var fd: Int32

    init(databasePath: String) throws {
        let path = databasePath + ".lock"
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError.unavailable("Cannot open \(path): \(String(cString: strerror(errno))).") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            fd = -1
            throw StoreError.conflict("Another process holds the database \(databasePath) (a running server?).")
        }
    }

    func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }
}
