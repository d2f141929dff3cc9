#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Something other than a client connection that an event loop watches: a descriptor
/// another protocol speaks on (a database connection), read and written on the loop's
/// thread only, so no request waits for it on a thread of its own.
public protocol LoopWatcher: AnyObject {
    /// The descriptor is ready, as epoll reported it: readable, writable, or `failed`
    /// (an error or a hang-up; reading then finds out which).
    func ready(readable: Bool, writable: Bool, failed: Bool)
    /// The loop's sweep (every 5 to 250 ms while it has client connections): time to check
    /// deadlines that no descriptor reports.
    func tick()
    /// The loop has stopped: nothing is reported again. Release the descriptor.
    func loopStopped()
}

/// The event loop a request arrived on (``Responder/loop``), for work that waits on other
/// descriptors without blocking it (``LoopWatcher``). Everything but ``execute(_:)`` and
/// ``isCurrent`` must be called on the loop's own thread.
public struct LoopHandle: Sendable {
    let loop: EventLoop

    /// Identifies the loop (one per thread) for the life of the server.
    public var id: ObjectIdentifier { ObjectIdentifier(loop) }

    /// Whether the calling thread is the loop's own.
    public var isCurrent: Bool { loop.isCurrentThread }

    /// Runs `job` on the loop's thread, after the jobs already queued there. Safe from any
    /// thread.
    /// - Returns: false when the loop has stopped and the job was dropped.
    @discardableResult
    public func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        loop.execute { _ in job() }
    }

    /// Runs `job` on the loop's thread once the events it is handling now are handled,
    /// without a lock or a wake (``EventLoop/soon(_:)``). Call on the loop's own thread.
    public func soon(_ job: @escaping @Sendable () -> Void) {
        loop.soon { _ in job() }
    }

    /// Reports `fd`'s readiness to `watcher` until ``unwatch(_:)`` (readable always, writable
    /// while asked for): the loop holds the watcher until then, or until it stops.
    public func watch(_ fd: Int32, writable: Bool = false, _ watcher: any LoopWatcher) throws {
        try loop.watch(fd, writable: writable, watcher)
    }

    /// Asks for `fd`'s writability to be reported, or stops asking.
    public func want(writable: Bool, _ fd: Int32) {
        loop.want(writable: writable, fd)
    }

    /// Stops watching `fd` and lets its watcher go (call before closing `fd`).
    public func unwatch(_ fd: Int32) {
        loop.unwatch(fd)
    }
}

extension Responder {
    /// The event loop the request arrived on; `nil` for a request answered in process.
    public var loop: LoopHandle? {
        if case let .connection(loop, _, _, _) = target { return LoopHandle(loop: loop) }
        return nil
    }
}
