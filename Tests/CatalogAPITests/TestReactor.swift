import Foundation
import Synchronization

@testable import CatalogStore

/// A ``ReadReactor`` of the tests' own: one thread that `poll`s the descriptors it watches
/// and runs what it is given, so a test can send reads from "a loop" straight to a store's
/// database (``SQLDatabase/readOnLoop(_:_:_:merging:isAbandoned:_:completion:)``) without
/// an HTTP server in between. Reports readiness level-triggered, and sweeps (``ReactorWatcher/tick()``)
/// every 20 ms.
final class TestReactor: ReadReactor, @unchecked Sendable {
    private struct Watched {
        let watcher: any ReactorWatcher
        var writable: Bool
    }

    /// Touched on the loop's thread only.
    private var watched: [Int32: Watched] = [:]
    /// Jobs given from any thread (`execute`), and those to run after the events at hand.
    private let jobs = Mutex<(now: [@Sendable () -> Void], stopped: Bool)>(([], false))
    private var after: [@Sendable () -> Void] = []
    private let wake: (read: Int32, write: Int32)
    private let thread = Mutex<pthread_t?>(nil)
    private let ended = DispatchSemaphore(value: 0)

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw POSIXError(.EMFILE) }
        wake = (fds[0], fds[1])
        _ = fcntl(wake.read, F_SETFL, O_NONBLOCK)
        let started = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            thread.withLock { $0 = pthread_self() }
            started.signal()
            run()
            ended.signal()
        }
        started.wait()
    }

    var id: ObjectIdentifier { ObjectIdentifier(self) }

    var isCurrent: Bool {
        guard let loop = thread.withLock({ $0 }) else { return false }
        return pthread_equal(loop, pthread_self()) != 0
    }

    func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        let taken = jobs.withLock { jobs in
            guard !jobs.stopped else { return false }
            jobs.now.append(job)
            return true
        }
        if taken {
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }
        return taken
    }

    func afterEvents(_ job: @escaping @Sendable () -> Void) { after.append(job) }

    func watch(_ fd: Int32, writable: Bool, _ watcher: any ReactorWatcher) throws {
        watched[fd] = Watched(watcher: watcher, writable: writable)
    }

    func want(writable: Bool, _ fd: Int32) { watched[fd]?.writable = writable }

    func unwatch(_ fd: Int32) { watched[fd] = nil }

    /// Runs `body` on the loop and returns what it returns.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            if !execute({ continuation.resume(returning: body()) }) { preconditionFailure("the test reactor has stopped") }
        }
    }

    /// Stops the loop (its watchers are told) and waits for its thread to end.
    func stop() {
        jobs.withLock { $0.stopped = true }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        ended.wait()
        close(wake.read)
        close(wake.write)
    }

    private func run() {
        while true {
            let fds = Array(watched.keys)
            var polled = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            polled += fds.map { pollfd(fd: $0, events: Int16(POLLIN) | (watched[$0]?.writable == true ? Int16(POLLOUT) : 0), revents: 0) }
            let ready = poll(&polled, nfds_t(polled.count), 20)
            if ready == 0 { for fd in fds { watched[fd]?.watcher.tick() } }
            for (index, fd) in fds.enumerated() {
                let events = polled[index + 1].revents
                guard events != 0, let watcher = watched[fd]?.watcher else { continue }
                let failed = events & Int16(POLLERR | POLLHUP | POLLNVAL) != 0
                watcher.ready(readable: events & Int16(POLLIN) != 0, writable: events & Int16(POLLOUT) != 0, failed: failed)
            }
            var drained = [UInt8](repeating: 0, count: 64)
            while read(wake.read, &drained, drained.count) > 0 {}
            let (now, stopped) = jobs.withLock { jobs in
                defer { jobs.now.removeAll() }
                return (jobs.now, jobs.stopped)
            }
            for job in now { job() }
            while !after.isEmpty {
                let due = after
                after.removeAll()
                for job in due { job() }
            }
            if stopped {
                for watched in watched.values { watched.watcher.loopStopped() }
                watched.removeAll()
                return
            }
        }
    }
}
