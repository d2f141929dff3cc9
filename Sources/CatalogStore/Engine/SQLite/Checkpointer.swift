import Foundation
import GRDB
import Synchronization

/// Copies committed WAL frames into the database file on a thread of its own, so the
/// writer never stops to checkpoint.
///
/// A few times a second it runs a passive checkpoint, which never blocks the writer or
/// readers. Under a steady stream of writes the WAL is then always copied but never
/// rewound (that needs a moment with no writer), so once it holds more than
/// ``restartFrames`` frames ``needsRestart`` asks the writer to run a restart
/// checkpoint between two batches: it copies the little that is left and makes the
/// next commit start the WAL from the beginning.
final class Checkpointer: @unchecked Sendable {
    private let connection: DatabaseQueue
    private let condition = NSCondition()
    private var stopped = false
    private var running = true
    private let interval: TimeInterval
    /// WAL size (in frames, 4 KiB each) above which the WAL is rewound: 16 MiB.
    static let restartFrames = 4096
    /// Set when the WAL should be rewound by the writer.
    let needsRestart = Atomic<Bool>(false)
    /// Backups copying now: the writer does not rewind the WAL meanwhile (a RESTART
    /// checkpoint waits for every reader, and a backup reads until it is done).
    let backupsRunning = Atomic<Int>(0)

    init(path: String, interval: TimeInterval = 0.25) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(1)
        configuration.label = "catalog-checkpoint"
        connection = try DatabaseQueue(path: path, configuration: configuration)
        self.interval = interval
        let thread = Thread { [self] in loop() }
        thread.name = "catalog-checkpoint"
        thread.start()
    }

    /// Stops the thread after the checkpoint in progress, if any.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while running { condition.wait() }
        condition.unlock()
        try? connection.close()
    }

    private func checkpoint() {
        _ = try? connection.writeWithoutTransaction { db in
            let frames = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)").map { $0[1] as Int } ?? 0
            if frames > Self.restartFrames { needsRestart.store(true, ordering: .relaxed) }
        }
    }

    private func loop() {
        condition.lock()
        while !stopped {
            condition.unlock()
            checkpoint()
            condition.lock()
            if !stopped { _ = condition.wait(until: Date(timeIntervalSinceNow: interval)) }
        }
        running = false
        condition.broadcast()
        condition.unlock()
    }
}
