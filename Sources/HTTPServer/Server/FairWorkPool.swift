import Foundation

/// A fixed pool of threads whose queue takes turns between callers: each caller's jobs
/// wait in a line of their own, and the threads take one job from each waiting caller in
/// turn. A caller with many jobs queued delays another caller's job by at most one of
/// its own per thread, where a single first-in, first-out queue would put every one of
/// them first. A caller holds at most its share of jobs, queued or running, and the
/// whole queue is bounded.
public final class FairWorkPool: @unchecked Sendable {
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

    /// Starts `threads` threads named `name-N`, which run at most `queueLimit` queued jobs
    /// in turns, at most `perCaller` of one caller's queued or running.
    public init(name: String, threads: Int, queueLimit: Int, perCaller: Int) {
        self.queueLimit = queueLimit
        self.perCaller = perCaller
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    /// Queues `job` in `caller`'s line.
    /// - Parameter share: the most jobs of this line queued or running, for a line whose
    ///   jobs are cheaper than the pool's others; ``perCaller`` when `nil`.
    /// - Returns: false, without queueing it, when `caller` holds its share or the queue is full.
    @discardableResult
    public func submit(for caller: String, share: Int? = nil, _ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let holding = held[caller, default: 0]
        guard holding < share ?? perCaller, queued < queueLimit else { return false }
        held[caller] = holding + 1
        if lines[caller] == nil { turns.append(caller) }
        lines[caller, default: []].append(job)
        queued += 1
        condition.signal()
        return true
    }

    private func work() {
        while true {
            condition.lock()
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
            if next * 2 > turns.count {
                turns.removeFirst(next)
                next = 0
            }
            queued -= 1
            condition.unlock()
            job()
            condition.lock()
            if let holding = held[caller], holding > 1 { held[caller] = holding - 1 } else { held[caller] = nil }
            condition.unlock()
        }
    }
}
