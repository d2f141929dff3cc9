#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a loop runs besides its connections: answers made on its own thread
/// (``EventLoop/soon(_:)``) and descriptors watched for others (``LoopWatcher``).
extension EventLoop {
    /// Runs `job` on this loop once the events it is handling now are handled, ahead of
    /// the jobs other threads queued (``execute(_:)``). Call on the loop's own thread only:
    /// an answer made there (a read the loop sent to the database) is delivered without a
    /// lock or a wake.
    func soon(_ job: @escaping @Sendable (EventLoop) -> Void) {
        soonJobs.append(job)
    }

    /// Runs the jobs ``soon(_:)`` queued, and those they queue.
    func runSoon() {
        while !soonJobs.isEmpty {
            let jobs = soonJobs
            soonJobs.removeAll(keepingCapacity: true)
            for job in jobs { job(self) }
        }
    }

    /// Whether the calling thread runs this loop.
    var isCurrentThread: Bool { owner.load(ordering: .acquiring) == UInt(pthread_self()) }

    // MARK: Other descriptors

    /// Reports `fd` to `watcher` (``LoopHandle/watch(_:writable:_:)``).
    func watch(_ fd: Int32, writable: Bool, _ watcher: any LoopWatcher) throws {
        guard !stopped else { throw SystemError("watch (the event loop has stopped)", errno: ESHUTDOWN) }
        nextConnectionID &+= 1
        let token = Self.token(fd: fd, id: nextConnectionID)
        try epoll.add(fd, events: Epoll.readable | (writable ? Epoll.writable : 0), token: token)
        watched[fd] = (token, watcher)
    }

    func want(writable: Bool, _ fd: Int32) {
        guard let watch = watched[fd] else { return }
        epoll.modify(fd, events: Epoll.readable | (writable ? Epoll.writable : 0), token: watch.token)
    }

    func unwatch(_ fd: Int32) {
        guard watched.removeValue(forKey: fd) != nil else { return }
        epoll.remove(fd)
    }
}
