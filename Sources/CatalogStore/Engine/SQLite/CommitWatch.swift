import CLinux
import Foundation
import Synchronization

/// Sees every commit to a SQLite database in WAL mode without a query and without a
/// system call: it maps the wal-index (`<file>-shm`) read-only and reads the header that
/// each commit rewrites before any reader may see it (its change counter, last frame and
/// salts, https://sqlite.org/walformat.html), from this process's connections or any
/// other program's. Each call that finds the header changed since the previous call moves
/// the generation (``SQLDatabase/generation()``) on by one.
///
/// What `PRAGMA data_version` on a reader told before, without its read transaction: two
/// `fcntl` locks on every cached answer. A call racing a commit may return the number from
/// before it, as a read begun at that moment would have shown the data from before it;
/// any call after the commit has returned sees it.
final class CommitWatch: @unchecked Sendable {
    private struct State {
        var signature: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
        var generation: UInt64 = 0
        var isMapped = true
    }

    private let header: UnsafeMutableRawPointer
    private static let length = 4096
    private let state = Mutex(State())

    /// Maps the wal-index of the database at `path`, which this process holds open in WAL
    /// mode (SQLite never shrinks it while a connection is open); `nil` when it cannot be.
    init?(databasePath path: String) {
        let fd = open(path + "-shm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        // Both copies of the header and the checkpoint information: 136 bytes.
        guard fstat(fd, &info) == 0, info.st_size >= 136, let map = mmap(nil, Self.length, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            return nil
        }
        header = map
    }

    deinit { stop() }

    /// The number of changes of the header seen so far; `nil` once stopped.
    func generation() -> UInt64? {
        state.withLock { state in
            guard state.isMapped else { return nil }
            var signature: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
            withUnsafeMutablePointer(to: &signature) { pointer in
                pointer.withMemoryRebound(to: UInt32.self, capacity: 4) { clinux_wal_index_signature(header, $0) }
            }
            if signature != state.signature {
                state.signature = signature
                state.generation += 1
            }
            return state.generation
        }
    }

    /// Unmaps the header, before the database closes (its last connection may remove the file).
    func stop() {
        state.withLock { state in
            guard state.isMapped else { return }
            munmap(header, Self.length)
            state.isMapped = false
        }
    }
}
