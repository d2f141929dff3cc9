import CLinux

/// Freed memory handed back to the kernel once the whole server is quiet.
extension EventLoop {
    /// Notes that the server is active now (``ServerCore/lastActive``): an event or a job
    /// on this loop, or a connection it closed (whose buffers were freed). At most once a
    /// millisecond a loop.
    func markActive() {
        guard now != markedActive else { return }
        markedActive = now
        core.lastActive.store(now, ordering: .relaxed)
    }

    /// The least time between two returns of freed memory, in milliseconds: a client
    /// that lets the server fall quiet again and again makes it trim at most this often.
    static let minimumGapBetweenMemoryReturns: Int64 = 5_000

    /// When freed memory is to be returned: once the whole server (every loop, with no
    /// request in flight) has been quiet for ``ServerConfiguration/quietBeforeReturningMemory``
    /// since its last activity, and the last return is ``minimumGapBetweenMemoryReturns``
    /// old; `nil` when nothing is due (returned since the last activity, a request in
    /// flight, or never configured).
    func freedMemoryDue() -> Int64? {
        guard let quiet = quietBeforeReturningMemory, core.inFlight.load(ordering: .relaxed) == 0 else { return nil }
        let active = core.lastActive.load(ordering: .relaxed)
        guard core.memoryReturnedAfter.load(ordering: .relaxed) != active else { return nil }
        return max(active + quiet, core.lastMemoryReturn.load(ordering: .relaxed) + Self.minimumGapBetweenMemoryReturns)
    }

    /// Hands the memory malloc holds freed back to the kernel (in every arena of the
    /// process), once a quiet spell of the whole server begins; of the loops that find it
    /// due, the one that claims it first. While busy, the server keeps what it frees for
    /// the next requests (as much as malloc is set up to keep: `catalog-server` keeps up
    /// to 64 MiB at the top of the heap, and serves buffers of up to 2 MiB from it); once
    /// idle, it gives that back rather than holding it until the next burst.
    func returnFreedMemory() {
        let active = core.lastActive.load(ordering: .relaxed)
        let returned = core.memoryReturnedAfter.load(ordering: .relaxed)
        guard returned != active,
            core.memoryReturnedAfter.compareExchange(expected: returned, desired: active, ordering: .relaxed).exchanged
        else { return }
        core.lastMemoryReturn.store(now, ordering: .relaxed)
        clinux_return_freed_memory()
        core.freedMemoryReturns.add(1, ordering: .relaxed)
    }
}
