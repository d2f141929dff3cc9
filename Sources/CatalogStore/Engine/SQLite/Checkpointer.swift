import Foundation
import GRDB
import Synchronization

/// Copies committed WAL frames into the database file on a thread of its own, so the
/// writer never stops to checkpoint.
///
/// A few times a second it runs a passive checkpoint, which never blocks the writer or
/// readers; not while nothing has committed since one that copied every frame (the
/// wal-index header tells, ``CommitWatch``), so an idle server reads nothing. Under a
/// steady stream of writes the WAL is then always copied but never rewound (that needs a moment with no writer), so once it holds more than
/// ``restartFrames`` frames ``needsRestart`` asks the writer to run a restart
/// checkpoint between two batches: it copies the little that is left and makes the
/// next commit start the WAL from the beginning.
final class Checkpointer: @unchecked Sendable {
    private let connection: DatabaseQueue
    private let condition = NSCondition()
    private var stopped = false
    private var running = true
    private let interval: TimeInterval
    /// Tells commits apart, when the wal-index can be mapped.
    private let commits: CommitWatch?
    /// The generation in which the last checkpoint copied every frame (its thread's own).
    private var copiedAll: UInt64?
    /// WAL size (in frames, 4 KiB each) above which the WAL is rewound: 16 MiB.
    static let restartFrames = 4096
    /// Set when the WAL should be rewound by the writer.
    let needsRestart = Atomic<Bool>(false)
    /// Backups copying now: the writer does not rewind the WAL meanwhile (a RESTART
    /// checkpoint waits for every reader, and a backup reads until it is done).
    let backupsRunning = Atomic<Int>(0)

    init(path: String, commits: CommitWatch?, interval: TimeInterval = 0.25) throws {
        self.commits = commits
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
        let generation = commits?.generation()
        if let generation, generation == copiedAll { return }
        copiedAll = nil
        _ = try? connection.writeWithoutTransaction { db in
            // (busy, frames in the WAL, frames copied)
            guard let row = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)") else { return }
            let frames: Int = row[1], copied: Int = row[2]
            if frames > Self.restartFrames { needsRestart.store(true, ordering: .relaxed) }
            if (row[0] as Int) == 0, copied == frames { copiedAll = generation }
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
