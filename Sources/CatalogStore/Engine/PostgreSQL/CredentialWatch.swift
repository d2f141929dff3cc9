import Foundation
import Synchronization

/// What lets servers that share a PostgreSQL database remember the credentials they have
/// checked, while a change to one made through any of them applies to the very next
/// request on every one (`Migrations/postgresql/0012_credential_generation.sql`).
///
/// - Every change that could make a remembered credential wrong moves a generation
///   number in its own transaction and notifies `catalog_credentials`.
/// - A server that remembers (``start(onChange:)``) holds a lease, a row of
///   `credential_replicas`: on each notification, and at least every second, its
///   listener reads the generation, forgets everything when it moved (``start(onChange:)``'s
///   closure), and then writes that it has seen it, renewing the lease for
///   ``leaseMilliseconds``. It uses what it remembers only while ``isCurrent``: until
///   its lease ends by its own clock, counted from before it asked for the renewal, so
///   always before the database's record of the lease ends.
/// - The write that changed a credential answers once every server with a live lease
///   has seen its generation (``awaitEveryServer()``): normally milliseconds, at most
///   a lease when a server stopped answering (its lease then ends, and with it its
///   use of what it remembered).
public final class CredentialWatch: Sendable {
    /// How long a renewed lease lasts, in milliseconds.
    static let leaseMilliseconds: Int64 = 5_000
    /// How often the lease is renewed when nothing changed.
    static let renewal: Duration = .seconds(1)
    /// What is taken off a lease by its holder, for clocks that run slightly apart.
    static let marginNanoseconds: UInt64 = 500_000_000

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

    /// This server's row in `credential_replicas`.
    let replica = UUID().uuidString
    private let state = Mutex(State())
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

    /// Renews the lease on `connection` (the listener's, autocommitting): reads the
    /// generation, forgets everything when it moved, then records it as seen.
    func renew(on connection: PostgresConnection) throws {
        let (onChange, known) = state.withLock { ($0.onChange, $0.generation) }
        guard let onChange else { return }
        let started = Self.monotonic()
        guard let generation = try connection.fetchValue("SELECT generation FROM credential_generation WHERE id = 1").int64 else {
            throw StoreError.unavailable("credential_generation has no row")
        }
        if generation != known { onChange() }
        if known == nil {
            // Once a connection: the rows of servers gone for a day (killed before they could end their lease).
            _ = try connection.execute("DELETE FROM credential_replicas WHERE alive_until < \(Self.databaseNow) - 86400000", [])
        }
        _ = try connection.execute(
            """
            INSERT INTO credential_replicas (replica, seen, alive_until) VALUES (?, ?, \(Self.databaseNow) + ?)
            ON CONFLICT (replica) DO UPDATE SET seen = excluded.seen, alive_until = excluded.alive_until
            """, [replica, generation, Self.leaseMilliseconds])
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

    /// Waits until every server with a live lease has seen the current generation (which
    /// counts every change committed before this call), or until the leases that have
    /// not end. When the database cannot be asked, waits a whole lease: by then every
    /// server has either renewed its lease, which forgets first, or stopped using what
    /// it remembers. Blocks: call it off the event loops.
    public func awaitEveryServer() {
        let end = ContinuousClock.now + .milliseconds(Self.leaseMilliseconds + 1_000)
        do {
            let generation = try read("SELECT generation FROM credential_generation WHERE id = 1", []).int64 ?? 0
            while ContinuousClock.now < end {
                let behind = try read("SELECT count(*) FROM credential_replicas WHERE seen < ? AND alive_until > \(Self.databaseNow)", [generation]).int ?? 0
                if behind == 0 { return }
                Thread.sleep(forTimeInterval: 0.002)
            }
        } catch {
            let left = end - ContinuousClock.now
            Thread.sleep(forTimeInterval: max(0, Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18))
        }
    }

    /// The database's time in milliseconds (one clock for every server's lease).
    static let databaseNow = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

    static func monotonic() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
