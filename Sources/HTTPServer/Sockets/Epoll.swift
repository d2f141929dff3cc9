import CLinux

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An epoll instance plus an eventfd used to wake it from other threads.
final class Epoll {
    static let readable = UInt32(EPOLLIN.rawValue)
    static let writable = UInt32(EPOLLOUT.rawValue)
    static let hangup = UInt32(EPOLLHUP.rawValue) | UInt32(EPOLLERR.rawValue)
    /// The peer closed its side (sent FIN): reported even while input is not wanted.
    static let peerClosed = UInt32(EPOLLRDHUP.rawValue)

    let fd: Int32
    let wakeFD: Int32
    /// The epoll data value reserved for the wake-up eventfd.
    static let wakeToken: UInt64 = .max

    init() throws {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError("epoll_create1") }
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard wakeFD >= 0 else {
            close(fd)
            throw SystemError("eventfd")
        }
        self.fd = fd
        self.wakeFD = wakeFD
        try add(wakeFD, events: Self.readable, token: Self.wakeToken)
    }

    deinit {
        close(wakeFD)
        close(fd)
    }

    func add(_ target: Int32, events: UInt32, token: UInt64) throws {
        var event = epoll_event(events: events, data: epoll_data_t(u64: token))
        guard epoll_ctl(fd, EPOLL_CTL_ADD, target, &event) == 0 else { throw SystemError("epoll_ctl(ADD)") }
    }

    func modify(_ target: Int32, events: UInt32, token: UInt64) {
        var event = epoll_event(events: events, data: epoll_data_t(u64: token))
        _ = epoll_ctl(fd, EPOLL_CTL_MOD, target, &event)
    }

    func remove(_ target: Int32) {
        _ = epoll_ctl(fd, EPOLL_CTL_DEL, target, nil)
    }

    /// Waits for events; `timeout` is in milliseconds (-1 waits forever).
    func wait(into events: UnsafeMutableBufferPointer<epoll_event>, timeout: Int32) -> Int {
        let count = epoll_wait(fd, events.baseAddress, Int32(events.count), timeout)
        return count < 0 ? 0 : Int(count)
    }

    /// Wakes a thread blocked in `wait`. Safe to call from any thread.
    func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Clears a pending wake-up.
    func drainWake() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8)
    }
}
