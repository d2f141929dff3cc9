import Foundation

/// A connection a ``ConnectionPool`` lends: one borrower at a time.
protocol PooledConnection: AnyObject {
    /// Whether the connection can no longer be used (it is dropped when given back).
    var isBroken: Bool { get }
}

/// A bounded set of connections, made when first needed (or given when opened); a
/// borrower waits at most `wait` for one, and a broken connection is dropped.
/// PostgreSQL's readers, and SQLite's (two of them opened with the database).
final class ConnectionPool<Connection: PooledConnection>: @unchecked Sendable {
    private let condition = NSCondition()
    private var idle: [Connection] = []
    private var count = 0
    private let size: Int
    private let wait: Duration
    private var closed = false
    private let connect: () throws -> Connection

    init(size: Int, wait: Duration, connect: @escaping () throws -> Connection) {
        self.size = size
        self.wait = wait
        self.connect = connect
    }

    /// Adds an open connection.
    func give(_ connection: Connection) {
        condition.lock()
        idle.append(connection)
        count += 1
        condition.unlock()
    }

    /// Runs `body` with a connection of the pool.
    func with<T>(_ body: (Connection) throws -> T) throws -> T {
        guard let connection = try borrow(waiting: true) else { throw StoreError.unavailable("Every database connection is busy; retry shortly.") }
        defer { giveBack(connection) }
        return try body(connection)
    }

    /// Runs `body` with a connection of the pool if one is free now (or can be made);
    /// `nil`, without waiting, when every connection is lent.
    func withFree<T>(_ body: (Connection) throws -> T) throws -> T? {
        guard let connection = try borrow(waiting: false) else { return nil }
        defer { giveBack(connection) }
        return try body(connection)
    }

    /// A connection; `nil` when none is free and `waiting` is false.
    @_specialize(exported:false,kind:full,where Connection == SQLiteReader)
    private func borrow(waiting: Bool) throws -> Connection? {
        condition.lock()
        if !waiting && idle.isEmpty && count >= size {
            condition.unlock()
            return nil
        }
        var deadline: Date?
        while idle.isEmpty && count >= size && !closed {
            let (seconds, attoseconds) = wait.components
            deadline = deadline ?? Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
            guard let until = deadline, condition.wait(until: until) else {
                condition.unlock()
                throw StoreError.unavailable("Every database connection is busy; retry shortly.")
            }
        }
        if closed {
            condition.unlock()
            throw StoreError.unavailable("The store is shutting down.")
        }
        if let connection = idle.popLast() {
            condition.unlock()
            return connection
        }
        count += 1
        condition.unlock()
        do {
            return try connect()
        } catch {
            condition.lock()
            count -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    @_specialize(exported:false,kind:full,where Connection == SQLiteReader)
    private func giveBack(_ connection: Connection) {
        condition.lock()
        if connection.isBroken || closed { count -= 1 } else { idle.append(connection) }
        condition.signal()
        condition.unlock()
    }

    /// Closes the idle connections (new ones are made when needed).
    func dropIdle() {
        condition.lock()
        count -= idle.count
        idle.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    /// Closes the idle connections; those lent out close when given back.
    func close() {
        condition.lock()
        closed = true
        condition.unlock()
        dropIdle()
    }
}
