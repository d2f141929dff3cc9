import CatalogStore
import HTTPServer

/// A server's event loop as the store's ``ReadReactor``: where PostgreSQL reads of one
/// statement wait without blocking a thread.
struct LoopReactor: ReadReactor {
    let loop: LoopHandle

    var id: ObjectIdentifier { loop.id }
    var isCurrent: Bool { loop.isCurrent }

    func execute(_ job: @escaping @Sendable () -> Void) -> Bool { loop.execute(job) }

    func afterEvents(_ job: @escaping @Sendable () -> Void) { loop.soon(job) }

    func watch(_ fd: Int32, writable: Bool, _ watcher: any ReactorWatcher) throws {
        try loop.watch(fd, writable: writable, Watching(watcher: watcher))
    }

    func want(writable: Bool, _ fd: Int32) { loop.want(writable: writable, fd) }

    func unwatch(_ fd: Int32) { loop.unwatch(fd) }

    /// The store's watcher, as the loop reports to it.
    private final class Watching: LoopWatcher {
        let watcher: any ReactorWatcher
        init(watcher: any ReactorWatcher) { self.watcher = watcher }
        func ready(readable: Bool, writable: Bool, failed: Bool) { watcher.ready(readable: readable, writable: writable, failed: failed) }
        func tick() { watcher.tick() }
        func loopStopped() { watcher.loopStopped() }
    }
}
