import CLinux
import GRDB
import GRDBSQLite

/// How long one read may work before SQLite interrupts it: every reader connection has a
/// progress handler that checks the calling thread's deadline every thousand virtual
/// machine steps, so no statement can hold a thread (an event loop above all) for long,
/// whatever a client asks. An interrupted read fails with ``StoreError/tooExpensive``.
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

    /// Installs the budget's check on `db`'s connection.
    static func install(on db: Database) {
        sqlite3_progress_handler(db.sqliteConnection, 1000, clinux_budget_exceeded, nil)
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds / 1_000_000_000))
    }
}
