import CLinux

/// How long one read may work before the engine interrupts it, so no statement can hold
/// a thread (an event loop above all) for long, whatever a client asks. In SQLite every
/// reader connection has a progress handler that, every thousand virtual machine steps,
/// checks the CPU time the calling thread has spent on the read against its allowance, and
/// the wall-clock time against ten allowances (a loaded machine stretches no read into a
/// refusal; a read blocked or starved is still bounded); in PostgreSQL the allowance is the
/// statement timeout. An interrupted read fails with ``StoreError/tooExpensive``.
public enum ReadBudget {
    /// The allowance of a read on a thread that set none, such as an event loop.
    public static let inline: Duration = .milliseconds(100)

    /// Gives each read on the calling thread `allowance` from now on (for threads
    /// reserved for reads known to be expensive).
    public static func allow(_ allowance: Duration) {
        clinux_budget_set_allowance(nanoseconds(allowance))
    }

    /// Runs `body` under the calling thread's allowance (an enclosing budget, if any, goes on).
    static func run<T>(_ body: () throws -> T) rethrows -> T {
        let allowance = clinux_budget_allowance()
        let started = clinux_budget_start(allowance == 0 ? nanoseconds(inline) : allowance) != 0
        defer { if started { clinux_budget_end() } }
        return try body()
    }

    /// The calling thread's allowance for each read.
    static var allowance: Duration {
        let nanoseconds = clinux_budget_allowance()
        return nanoseconds == 0 ? inline : .nanoseconds(Int64(nanoseconds))
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds / 1_000_000_000))
    }
}
