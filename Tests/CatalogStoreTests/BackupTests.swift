import CatalogModels
import Foundation
import GRDB
import Synchronization
import Testing

@testable import CatalogStore

/// Online backups under write load, restores, and the database lock.
@Suite struct BackupTests {
    @Test func backupUnderWriteLoadHoldsEveryAcknowledgedWrite() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        defer { try? store.close() }
        let acknowledged = Mutex<[CatalogID]>([])
        let first = DispatchGroup()
        for index in 0..<300 {
            first.enter()
            store.games.create(GameInput(name: "Game \(index)", imageName: "g")) { result in
                if let game = try? result.get() { acknowledged.withLock { $0.append(game.id) } }
                first.leave()
            }
        }
        first.wait()
        let before = acknowledged.withLock { $0 }
        // More writes stream in while the backup runs.
        let group = DispatchGroup()
        let submitted = DispatchSemaphore(value: 0)
        let writer = Thread {
            for index in 300..<600 {
                group.enter()
                store.games.create(GameInput(name: "Late \(index)", imageName: "g")) { _ in group.leave() }
            }
            submitted.signal()
        }
        writer.start()
        let copy = scratch.directory.appendingPathComponent("backups/copy.sqlite").path
        let bytes = try store.backup(to: copy)
        submitted.wait()
        group.wait()
        #expect(bytes > 0)
        #expect(before.count == 300)
        let queue = try DatabaseQueue(path: copy)
        try queue.read { db in
            #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
            let ids = Set(try String.fetchAll(db, sql: "SELECT id FROM games"))
            for id in before { #expect(ids.contains(id.rawValue), "acknowledged before the backup: \(id)") }
        }
        #expect(throws: StoreError.self) { try store.backup(to: copy) }
    }

    @Test func theDatabaseIsHeldByOneStoreAndRestoredOnlyWhenFree() throws {
        let scratch = try Scratch()
        let store = try scratch.open()
        let game = try wait { store.games.create(GameInput(name: "Kept", imageName: "k"), completion: $0) }
        let catalogID = try store.changes.catalogID()
        let copy = scratch.directory.appendingPathComponent("copy.sqlite").path
        _ = try store.backup(to: copy)
        _ = try wait { store.games.create(GameInput(name: "After the backup", imageName: "a"), completion: $0) }

        #expect(throws: StoreError.self, "a second store on the same file") { try scratch.open() }
        #expect(throws: StoreError.self, "no restore under a running store") { try CatalogStore.restore(from: copy, to: scratch.database) }
        try store.close()

        try CatalogStore.restore(from: copy, to: scratch.database)
        let restored = try scratch.open()
        defer { try? restored.close() }
        #expect(try restored.games.count() == 1)
        #expect(try restored.games.rendered(game.id) != nil)
        // Sync tokens of the catalog's later history are refused by the restored one.
        #expect(try restored.changes.catalogID() != catalogID)
    }
}
