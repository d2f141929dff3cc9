import Foundation
import Synchronization

/// A fixed pool of threads with a bounded queue, for work that must not run on an event
/// loop. A full queue refuses more work at once (503 with `Retry-After` for a request)
/// instead of growing, and a request whose client has gone is dropped unrun.
///
/// Callers take turns: each caller's jobs wait in a line of their own, and the threads
/// take one job from each waiting line in turn, so a caller with many jobs queued delays
/// another's by at most one of its own per thread, where one first-in, first-out queue
/// would put every one of them first. A caller holds at most its share of jobs, queued or
/// running. Jobs submitted without a caller share one line: first in, first out.
public final class WorkPool: @unchecked Sendable {
    /// The pool for blocking handlers (``Handler/blocking(_:)``): file I/O, `fsync`, locks.
    public static let blocking = WorkPool(name: "blocking", threads: max(8, ProcessInfo.processInfo.activeProcessorCount * 4), queueLimit: 1024)

    /// The answer to a request refused because the queue is full.
    public static let busy = HTTPError(
        .serviceUnavailable, code: "serverBusy", detail: "The server is busy; retry shortly.",
        headers: ["Retry-After": "1"])

    /// The most jobs one caller may have queued or running at once.
    public let perCaller: Int
    private let queueLimit: Int
    private let condition = NSCondition()
    /// Each caller's queued jobs, oldest first.
    private var lines: [String: [@Sendable () -> Void]] = [:]
    /// Each caller's jobs, queued or running.
    private var held: [String: Int] = [:]
    /// The callers with jobs queued, in the order of their turns (`turns[next...]`).
    private var turns: [String] = []
    private var next = 0
    private var queued = 0
    private let refusals = Atomic<Int>(0)

    /// Starts `threads` threads named `name-N`, which run at most `queueLimit` queued jobs
    /// in turns, at most `perCaller` of one caller's queued or running.
    public init(name: String, threads: Int, queueLimit: Int, perCaller: Int = .max) {
        self.queueLimit = queueLimit
        self.perCaller = perCaller
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    /// Jobs refused because the queue or a caller's share was full, since start.
    public var refused: Int { refusals.load(ordering: .relaxed) }

    /// Queues `job` in `caller`'s line (jobs without a caller share one).
    /// - Parameter share: the most jobs of this line queued or running, for a line whose
    ///   jobs are cheaper than the pool's others; ``perCaller`` when `nil`.
    /// - Returns: false, without queueing it, when `caller` holds its share or the queue is full.
    @discardableResult
    public func submit(for caller: String = "", share: Int? = nil, _ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        let holding = held[caller, default: 0]
        guard holding < share ?? perCaller, queued < queueLimit else {
            condition.unlock()
            refusals.add(1, ordering: .relaxed)
            return false
        }
        held[caller] = holding + 1
        if lines[caller] == nil { turns.append(caller) }
        lines[caller, default: []].append(job)
        queued += 1
        condition.signal()
        condition.unlock()
        return true
    }

    /// Queues `work` for `responder`'s request in `caller`'s line: what it returns answers
    /// the request (`nil`: it answers later itself), and so does its error; it is dropped
    /// unrun when the client has gone before its turn.
    /// - Returns: false, without queueing it, when the queue or the caller's share is full.
    public func submit(
        for caller: String = "", answering responder: Responder,
        _ work: @escaping @Sendable () throws -> HTTPResponse?
    ) -> Bool {
        submit(for: caller) {
            guard !responder.isAbandoned else { return }
            do {
                if let response = try work() { responder.respond(response) }
            } catch {
                responder.fail(error)
            }
        }
    }

    /// Answers the deferred request of `responder` with what `work` returns, run on the
    /// pool: 503 at once when the queue is full, nothing when the client has gone before
    /// its turn.
    public func run(for responder: Responder, _ work: @escaping @Sendable () throws -> HTTPResponse) {
        if !submit(answering: responder, work) { responder.fail(Self.busy) }
    }

    private func work() {
        // The caller of the job this thread ran last, released when it next takes the lock
        // (one lock a job rather than two, so the event loops queueing work contend less).
        var finished: String?
        while true {
            condition.lock()
            if let caller = finished {
                if let holding = held[caller], holding > 1 { held[caller] = holding - 1 } else { held[caller] = nil }
                finished = nil
            }
            while queued == 0 { condition.wait() }
            let caller = turns[next]
            next += 1
            var line = lines.removeValue(forKey: caller) ?? []
            let job = line.removeFirst()
            if !line.isEmpty {
                // Back of the round, behind every caller waiting now.
                lines[caller] = line
                turns.append(caller)
            }
            // Drop taken turns once they are the larger part, so the queue never grows
            // with finished work.
            if next * 2 > turns.count {
                turns.removeFirst(next)
                next = 0
            }
            queued -= 1
            condition.unlock()
            job()
            finished = caller
        }
    }
}
