import CLinux
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One epoll-driven thread that owns a set of connections.
///
/// Everything a loop owns (its connections, buffers and timers) is touched only on its
/// own thread; other threads reach it through `execute`, which queues a job and wakes
/// the loop through an eventfd. Loop 0 also owns the listening socket and hands new
/// connections to the loops in turn.
final class EventLoop: @unchecked Sendable {
    let index: Int
    let core: ServerCore
    let date = DateCache()
    let epoll: Epoll
    /// The loop's connections by descriptor, for its events.
    private var connections: [Connection?] = []
    /// The same connections, densely: sweeps and shutdown walk these, whatever the
    /// descriptors' numbers (a process with thousands of descriptors open elsewhere makes the
    /// table above that long).
    private var open: [Connection] = []
    var connectionCount: Int { open.count }
    private let mailbox = Mutex<Mailbox>(Mailbox())

    private struct Mailbox {
        var jobs: [@Sendable (EventLoop) -> Void] = []
        /// Set when the loop has stopped: later jobs are refused.
        var closed = false
    }
    private let wakeRequested = Atomic<Bool>(false)

    /// Loop 0 only: the listening socket and the loops it hands connections to.
    private var listener: Int32 = -1
    var peers: [EventLoop] = []
    private var acceptCursor = 0
    private var acceptPausedUntil: Int64 = 0

    private(set) var isDraining = false
    private var drainDeadline: Int64 = 0
    private(set) var stopped = false
    var nextConnectionID: UInt64 = 0
    private(set) var now: Int64 = EventLoop.monotonicMilliseconds()
    private var nextSweep: Int64 = 0
    /// How many times the loop has woken (its thread only).
    private(set) var rounds = 0
    /// The last time this loop marked the server active (``ServerCore/lastActive``).
    var markedActive: Int64 = 0
    /// How long the server stays quiet before freed memory is returned, in milliseconds
    /// (`nil`: never).
    let quietBeforeReturningMemory: Int64?
    private let sweepInterval: Int64
    /// Connections whose TLS session holds input the socket no longer signals.
    private var readyToRead: [Connection] = []
    /// Jobs this loop's own thread queued for once the events it is handling are handled
    /// (``soon(_:)``): no lock, no wake.
    var soonJobs: [@Sendable (EventLoop) -> Void] = []
    /// Descriptors watched for others (``LoopWatcher``), by descriptor, with their tokens.
    var watched: [Int32: (token: UInt64, watcher: any LoopWatcher)] = [:]
    /// The thread running the loop (`pthread_self()`), 0 before it runs.
    let owner = Atomic<UInt>(0)
    private var requestIDState: UInt64 = {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }()

    init(index: Int, core: ServerCore) throws {
        self.index = index
        self.core = core
        epoll = try Epoll()
        let configuration = core.configuration
        let shortest = min(configuration.headTimeout, configuration.bodyTimeout, configuration.keepAliveTimeout, configuration.lingerTimeout)
        sweepInterval = max(5, min(250, shortest.milliseconds / 10))
        quietBeforeReturningMemory = configuration.quietBeforeReturningMemory.map { max(1, $0.milliseconds) }
    }

    static func monotonicMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    // MARK: Cross-thread entry points

    /// Runs `job` on this loop's thread. Safe from any thread.
    /// - Returns: false when the loop has stopped and the job was dropped.
    @discardableResult
    func execute(_ job: @escaping @Sendable (EventLoop) -> Void) -> Bool {
        let accepted = mailbox.withLock { mailbox -> Bool in
            guard !mailbox.closed else { return false }
            mailbox.jobs.append(job)
            return true
        }
        if accepted, !wakeRequested.exchange(true, ordering: .acquiringAndReleasing) {
            epoll.wake()
        }
        return accepted
    }

    /// Makes this loop accept connections on `fd`.
    func listen(on fd: Int32) throws {
        listener = fd
        try epoll.add(fd, events: Epoll.readable, token: UInt64(fd))
    }

    // MARK: The loop

    /// Runs until a drain completes. Call on the loop's own thread.
    func run() {
        owner.store(UInt(pthread_self()), ordering: .releasing)
        let capacity = 512
        let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        nextSweep = now + sweepInterval
        while true {
            // With nothing to sweep, the loop sleeps until an event or a job wakes it.
            let idle = open.isEmpty && acceptPausedUntil == 0 && !isDraining
            var timeout = !readyToRead.isEmpty ? 0 : idle ? -1 : Int32(clamping: max(0, nextSweep - now))
            if timeout != 0, let due = freedMemoryDue() {
                // Awake when the server will have been quiet long enough to hand freed memory back.
                let wait = Int32(clamping: max(1, due - now))
                timeout = timeout < 0 ? wait : min(timeout, wait)
            }
            let count = epoll.wait(into: events, timeout: timeout)
            rounds &+= 1
            now = Self.monotonicMilliseconds()
            date.refresh()
            if count > 0 {
                markActive()
            } else if readyToRead.isEmpty, let due = freedMemoryDue(), now >= due {
                returnFreedMemory()
            }
            for slot in 0..<count {
                let token = events[slot].data.u64
                let flags = events[slot].events
                if token == Epoll.wakeToken {
                    epoll.drainWake()
                    runMailbox()
                } else if token == UInt64(UInt32(bitPattern: listener)) {
                    acceptConnections()
                } else {
                    dispatch(token: token, flags: flags)
                }
            }
            runSoon()
            if !readyToRead.isEmpty { readBuffered() }
            if now >= nextSweep {
                sweep()
                nextSweep = now + sweepInterval
            }
            runSoon()
            if isDraining, connectionCount == 0 || now >= drainDeadline { break }
        }
        stopped = true
        for connection in open { connection.close() }
        runSoon()
        runMailbox(closing: true)
        let watchers = watched.values.map(\.watcher)
        for (fd, _) in watched { epoll.remove(fd) }
        watched.removeAll()
        for watcher in watchers { watcher.loopStopped() }
        runSoon()
        // No later thread that happens to get the same id is taken for this loop's.
        owner.store(0, ordering: .releasing)
    }

    /// Runs the queued jobs. A wake stays requested while they run, so jobs queued
    /// meanwhile (by them, or by other threads) cost no eventfd write: they run in the
    /// next round. After a few rounds, or ``jobsPerTurn`` jobs (thousands of event-stream
    /// writes can arrive at once), the loop wakes itself instead, so that its sockets get a
    /// turn before the rest.
    private func runMailbox(closing: Bool = false) {
        var budget = closing ? Int.max : Self.jobsPerTurn
        for _ in 0..<(closing ? Int.max : 4) {
            let jobs = takeJobs(closing: closing, limit: budget)
            if jobs.isEmpty {
                if clearWakeRequest() { return }
                wakeRequested.store(true, ordering: .sequentiallyConsistent)
                continue
            }
            for job in jobs { job(self) }
            budget -= jobs.count
            if budget <= 0 { break }
        }
        if !mailbox.withLock({ $0.jobs.isEmpty }) || !clearWakeRequest() { epoll.wake() }
    }

    /// The most queued jobs one turn of the loop runs before it looks at its sockets again.
    static let jobsPerTurn = 64

    /// Stops asking for a wake. False when jobs wait: queued just before, their senders
    /// found a wake requested and woke nobody.
    private func clearWakeRequest() -> Bool {
        wakeRequested.store(false, ordering: .sequentiallyConsistent)
        return mailbox.withLock { $0.jobs.isEmpty }
    }

    /// The oldest `limit` queued jobs (all of them, mostly), taken off the queue.
    private func takeJobs(closing: Bool, limit: Int) -> [@Sendable (EventLoop) -> Void] {
        mailbox.withLock { mailbox in
            mailbox.closed = mailbox.closed || closing
            guard mailbox.jobs.count > limit else {
                let taken = mailbox.jobs
                mailbox.jobs.removeAll(keepingCapacity: true)
                return taken
            }
            let taken = Array(mailbox.jobs.prefix(limit))
            mailbox.jobs.removeFirst(limit)
            return taken
        }
    }

    /// A connection's epoll token: its descriptor in the low 32 bits and the low 32 bits
    /// of its id above, so an event queued for a closed connection is never delivered to
    /// a new one that reused the descriptor in the same `epoll_wait` batch.
    static func token(fd: Int32, id: UInt64) -> UInt64 {
        UInt64(UInt32(bitPattern: fd)) | (id & 0xFFFF_FFFF) << 32
    }

    private func dispatch(token: UInt64, flags: UInt32) {
        let fd = Int(token & 0xFFFF_FFFF)
        guard fd < connections.count, let connection = connections[fd], Self.token(fd: connection.fd, id: connection.id) == token else {
            if let watch = watched[Int32(truncatingIfNeeded: fd)], watch.token == token {
                watch.watcher.ready(readable: flags & Epoll.readable != 0, writable: flags & Epoll.writable != 0, failed: flags & Epoll.hangup != 0)
            }
            return
        }
        if flags & Epoll.hangup != 0, flags & Epoll.readable == 0 {
            connection.close()
            return
        }
        if flags & Epoll.peerClosed != 0, connection.abandonIfAwaiting() { return }
        if flags & Epoll.writable != 0 { connection.onWritable() }
        if flags & Epoll.readable != 0, !connection.isClosed { connection.onReadable() }
    }

    /// Has `connection` read again after this round of events (its TLS session holds
    /// records already taken off the socket, so epoll will not report them).
    func readSoon(_ connection: Connection) {
        readyToRead.append(connection)
    }

    private func readBuffered() {
        let ready = readyToRead
        readyToRead.removeAll(keepingCapacity: true)
        core.bufferedReadPasses.add(ready.count, ordering: .relaxed)
        for connection in ready {
            connection.readScheduled = false
            if !connection.isClosed { connection.onReadable() }
        }
    }

    private func sweep() {
        if acceptPausedUntil > 0, now >= acceptPausedUntil, listener >= 0 {
            acceptPausedUntil = 0
            epoll.modify(listener, events: Epoll.readable, token: UInt64(listener))
        }
        let before = open.count
        for connection in open { connection.checkDeadlines(now: now) }
        if open.count < before { markActive() }
        if !watched.isEmpty {
            // A watcher may stop watching as it ticks.
            for watcher in watched.values.map(\.watcher) { watcher.tick() }
        }
    }

    // MARK: Connections

    private func acceptConnections() {
        for _ in 0..<64 {
            let accepted: (fd: Int32, peer: String, address: IPAddress?)?
            do {
                accepted = try Socket.accept(listener)
            } catch {
                // Out of descriptors or memory: stop accepting briefly instead of spinning.
                epoll.modify(listener, events: 0, token: UInt64(listener))
                acceptPausedUntil = now + 100
                return
            }
            guard let (fd, peer, address) = accepted else { return }
            // A trusted proxy's connection is counted under each request's client, once
            // its head (or PROXY header) names it.
            let proxy = address.map { core.configuration.trustedProxies?.trusts($0) == true } ?? false
            let client = proxy ? nil : address?.clientKey ?? "unknown"
            if core.openConnections.add(1, ordering: .relaxed).newValue > core.configuration.maxConnections {
                core.openConnections.subtract(1, ordering: .relaxed)
                core.refusedConnections.add(1, ordering: .relaxed)
                refuse(fd, ResponseWriter.overloaded)
                continue
            }
            if let client, !core.admit(client) {
                core.openConnections.subtract(1, ordering: .relaxed)
                core.refusedPerAddress.add(1, ordering: .relaxed)
                refuse(fd, ResponseWriter.tooManyFromAddress)
                continue
            }
            let target = peers[acceptCursor % peers.count]
            acceptCursor &+= 1
            if target === self {
                adopt(fd: fd, peer: peer, address: address, client: client)
            } else if !target.execute({ $0.adopt(fd: fd, peer: peer, address: address, client: client) }) {
                drop(fd, client: client)  // that loop already finished a shutdown
            }
        }
    }

    /// Sends a connection that is not taken its one response and closes it (a TLS
    /// client could not read a plaintext answer: it is only closed).
    private func refuse(_ fd: Int32, _ response: [UInt8]) {
        if core.configuration.tls == nil {
            response.withUnsafeBytes { _ = send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        Glibc.close(fd)
    }

    private func adopt(fd: Int32, peer: String, address: IPAddress?, client: String?) {
        guard !stopped, !isDraining else { return drop(fd, client: client) }
        var session: TLSSession?
        if let tls = core.configuration.tls {
            guard let made = tls.makeSession(fd: fd) else { return drop(fd, client: client) }
            session = made
        }
        nextConnectionID &+= 1
        let connection = Connection(fd: fd, id: nextConnectionID, peer: peer, address: address, client: client, loop: self, tls: session)
        let slot = Int(fd)
        if slot >= connections.count {
            connections.append(contentsOf: repeatElement(nil, count: max(slot + 1 - connections.count, connections.count)))
        }
        do {
            try epoll.add(fd, events: Epoll.readable | Epoll.peerClosed, token: Self.token(fd: fd, id: nextConnectionID))
        } catch {
            return drop(fd, client: client)
        }
        connections[slot] = connection
        connection.openSlot = open.count
        open.append(connection)
    }

    /// Closes an accepted descriptor no connection was made for, and uncounts it.
    private func drop(_ fd: Int32, client: String?) {
        Glibc.close(fd)
        if let client { core.release(client) }
        core.openConnections.subtract(1, ordering: .relaxed)
    }

    func forget(_ connection: Connection) {
        let slot = Int(connection.fd)
        guard slot < connections.count, connections[slot] === connection else { return }
        connections[slot] = nil
        let last = open.removeLast()
        if last !== connection {
            open[connection.openSlot] = last
            last.openSlot = connection.openSlot
        }
        if let client = connection.client { core.release(client) }
        core.openConnections.subtract(1, ordering: .relaxed)
    }

    func setInterest(_ connection: Connection, _ events: UInt32) {
        epoll.modify(connection.fd, events: events, token: Self.token(fd: connection.fd, id: connection.id))
    }

    /// The connection `fd` if it is still the one with `id`.
    func connection(fd: Int32, id: UInt64) -> Connection? {
        let slot = Int(fd)
        guard slot < connections.count, let connection = connections[slot], connection.id == id else { return nil }
        return connection
    }

    /// A new request id: 16 hex digits from a per-loop SplitMix64 sequence (unique enough to
    /// correlate logs; not a secret).
    func makeRequestID() -> String {
        requestIDState &+= 0x9E37_79B9_7F4A_7C15
        var z = requestIDState
        z = (z ^ (z >> 30)) &* 0xBF58_476C_E5B9_E11D
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        // 16 lowercase hex digits, written directly (as `String(z, radix: 16)`, zero-padded).
        return String(unsafeUninitializedCapacity: 16) { bytes in
            for index in 0..<16 {
                let digit = UInt8(truncatingIfNeeded: z >> UInt64(60 - 4 * index)) & 0x0F
                bytes[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
            }
            return 16
        }
    }

    // MARK: Shutdown

    /// Stops accepting, closes idle connections, and lets requests in flight finish
    /// until `deadline` (monotonic milliseconds).
    func beginDrain(deadline: Int64) {
        isDraining = true
        drainDeadline = deadline
        if listener >= 0 {
            epoll.remove(listener)
            Glibc.close(listener)
            listener = -1
        }
        for connection in open { connection.closeIfIdleWhileDraining() }
    }
}
