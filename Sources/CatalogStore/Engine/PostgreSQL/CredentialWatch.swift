import Foundation
import Synchronization

/// What lets servers that share a PostgreSQL database remember the credentials they have
/// checked, while a change to one made through any of them applies to the very next
/// request on every one (`Migrations/postgresql/0012_credential_generation.sql`).
///
/// - Every change that could make a remembered credential wrong moves a generation
///   number, in the transaction of the change, and notifies `catalog_credentials`.
/// - A server that remembers (``start(onChange:)``) holds a lease, a row of
///   `credential_replicas`. On each notification, and at least every second, its
///   listener renews the lease first, then reads the generation, forgets everything
///   when it moved (or when the lease had lapsed), and then records the generation as
///   seen. It uses what it remembers only while ``isCurrent``: until its lease ends by
///   its own clock, counted from before it asked for the renewal, so always before the
///   database's record of the lease ends.
/// - The write that changed a credential answers once every server whose lease is live
///   (or ended less than ``toleranceMilliseconds`` ago, by the database's clock, for a
///   clock that steps) has seen its generation (``afterEveryServer(_:)``): normally
///   milliseconds, at most a lease and the tolerance when a server stopped answering.
///   One poller thread serves every waiting write.
public final class CredentialWatch: Sendable {
    /// How long a renewed lease lasts, in milliseconds.
    static let leaseMilliseconds: Int64 = 5_000
    /// How long after its end, by the database's clock, a lease still holds up a change.
    static let toleranceMilliseconds: Int64 = 1_000
    /// How often the lease is renewed when nothing changed.
    static let renewal: Duration = .seconds(1)
    /// What is taken off a lease by its holder, for clocks that run slightly apart.
    static let marginNanoseconds: UInt64 = 500_000_000
    /// The most changes that may wait for the servers at once; more are answered after
    /// a whole lease and its tolerance, without asking the database.
    static let maxWaiting = 1_024

    private struct State {
        /// Until when (monotonic nanoseconds) remembered credentials may be used.
        var deadline: UInt64 = 0
        /// The generation whose changes are applied (forgotten); `nil` before the first look.
        var generation: Int64?
        /// Forgets everything remembered; `nil` until this server remembers.
        var onChange: (@Sendable () -> Void)?
        /// When the lease was last renewed (monotonic nanoseconds).
        var renewed: UInt64 = 0
    }

    /// A change waiting for every server to have seen it.
    private struct Waiter {
        let id: UInt64
        /// The generation to be seen (read once the change is committed); `nil` until read.
        var generation: Int64?
        let end: ContinuousClock.Instant
        let done: @Sendable () -> Void
    }

    private struct Waiting {
        var waiters: [Waiter] = []
        var polling = false
        var nextID: UInt64 = 0
    }

    /// This server's row in `credential_replicas`.
    let replica = UUID().uuidString
    private let state = Mutex(State())
    private let waiting = Mutex(Waiting())
    /// Runs a read on a pooled connection (the database's).
    private let read: @Sendable (String, SQLArguments) throws -> SQLValue

    init(read: @escaping @Sendable (String, SQLArguments) throws -> SQLValue) {
        self.read = read
    }

    /// Makes this server one that remembers: `onChange` forgets everything it remembers,
    /// called before the server says it has seen a change. Credentials are current from
    /// the first renewal of the lease on.
    public func start(onChange: @escaping @Sendable () -> Void) {
        state.withLock { $0.onChange = onChange }
    }

    /// Whether remembered credentials may be used now.
    public var isCurrent: Bool {
        let now = Self.monotonic()
        return state.withLock { $0.onChange != nil && now < $0.deadline }
    }

    /// Whether the lease is due for renewal (a second since the last), for a server that remembers.
    var isDue: Bool {
        let now = Self.monotonic()
        return state.withLock { $0.onChange != nil && now >= $0.renewed + UInt64(Self.renewal.components.seconds) * 1_000_000_000 }
    }

    /// Renews the lease on `connection` (the listener's, autocommitting). The lease
    /// first: from then on a change waits for this server. Then the generation: a change
    /// committed before the renewal is in it, and everything is forgotten when it moved
    /// or the lease had lapsed meanwhile (a change may have been answered without this
    /// server). Last, the generation is recorded as seen.
    func renew(on connection: PostgresConnection) throws {
        let started = Self.monotonic()
        let (onChange, known, wasCurrent) = state.withLock { ($0.onChange, $0.generation, started < $0.deadline) }
        guard let onChange else { return }
        _ = try connection.execute(
            """
            INSERT INTO credential_replicas (replica, seen, alive_until) VALUES (?, 0, \(Self.databaseNow) + ?)
            ON CONFLICT (replica) DO UPDATE SET alive_until = excluded.alive_until
            """, [replica, Self.leaseMilliseconds])
        guard let generation = try connection.fetchValue("SELECT generation FROM credential_generation WHERE id = 1").int64 else {
            throw StoreError.unavailable("credential_generation has no row")
        }
        if generation != known || !wasCurrent { onChange() }
        if known == nil {
            // Once a connection: the rows of servers gone for a day (killed before they could end their lease).
            _ = try connection.execute("DELETE FROM credential_replicas WHERE alive_until < \(Self.databaseNow) - 86400000", [])
        }
        _ = try connection.execute("UPDATE credential_replicas SET seen = ? WHERE replica = ?", [generation, replica])
        state.withLock { state in
            state.generation = generation
            state.renewed = started
            state.deadline = started + UInt64(Self.leaseMilliseconds) * 1_000_000 - Self.marginNanoseconds
        }
    }

    /// Stops using what is remembered (the listener lost its connection: it may have
    /// missed a notification); the next renewal forgets everything first.
    func lapse() {
        state.withLock { state in
            state.deadline = 0
            state.generation = nil
        }
    }

    /// Gives up the lease (the server is closing), on `connection`.
    func end(on connection: PostgresConnection) {
        lapse()
        _ = try? connection.execute("DELETE FROM credential_replicas WHERE replica = ?", [replica])
    }

    /// Calls `done` once every server with a live lease has seen the current generation
    /// (which counts every change committed before this call), or once the leases that
    /// have not can no longer be live. When the database cannot be asked, after a whole
    /// lease and its tolerance: by then every server has either renewed its lease, which
    /// forgets first, or stopped using what it remembers. `done` runs on the poller's
    /// thread, never on the caller's.
    public func afterEveryServer(_ done: @escaping @Sendable () -> Void) {
        let end = ContinuousClock.now + .milliseconds(Self.leaseMilliseconds + Self.toleranceMilliseconds) + .milliseconds(500)
        let startsPoller = waiting.withLock { waiting in
            waiting.nextID += 1
            waiting.waiters.append(Waiter(id: waiting.nextID, generation: waiting.waiters.count < Self.maxWaiting ? nil : Int64.max, end: end, done: done))
            defer { waiting.polling = true }
            return !waiting.polling
        }
        if startsPoller {
            let thread = Thread { [self] in poll() }
            thread.name = "catalog-credential-waits"
            thread.start()
        }
    }

    /// Answers the waiting changes as the servers see them, until none waits.
    private func poll() {
        var pause = 0.002
        while true {
            let now = ContinuousClock.now
            // One look at the generation for the changes waiting unread now: each committed before it.
            let unread = Set(waiting.withLock { $0.waiters.filter { $0.generation == nil }.map(\.id) })
            let current = unread.isEmpty ? nil : (try? read("SELECT generation FROM credential_generation WHERE id = 1", []))?.int64
            let seen =
                (try? read(
                    "SELECT coalesce(min(seen), 9223372036854775807) FROM credential_replicas WHERE alive_until > \(Self.databaseNow) - ?",
                    [Self.toleranceMilliseconds]))?.int64
            let answered: [@Sendable () -> Void] = waiting.withLock { waiting in
                if let current {
                    for index in waiting.waiters.indices where unread.contains(waiting.waiters[index].id) { waiting.waiters[index].generation = current }
                }
                var done: [@Sendable () -> Void] = []
                waiting.waiters.removeAll { waiter in
                    let seenIt = waiter.generation.flatMap { generation in seen.map { $0 >= generation } } ?? false
                    guard seenIt || now >= waiter.end else { return false }
                    done.append(waiter.done)
                    return true
                }
                if waiting.waiters.isEmpty { waiting.polling = false }
                return done
            }
            for done in answered { done() }
            guard waiting.withLock({ $0.polling }) else { return }
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 1.5, 0.05)
        }
    }

    /// The database's time in milliseconds (one clock for every server's lease).
    static let databaseNow = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

    static func monotonic() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
