import CatalogModels
import Foundation
import GRDB

extension CatalogStore {
    /// Applies `records` (an export, or part of one) in one transaction: each resource is
    /// created with its id, times and version when absent, changed when its content
    /// differs (its version then moves past both its current and the imported one), and
    /// left alone when equal, so importing the same records twice changes nothing.
    /// Playlists take their entries (ids and order) from the record; reply counts are
    /// counted, not taken from the records. Fails with
    /// `invalid` naming `/records/N/…` when a record refers to an item or comment that
    /// neither exists nor comes earlier, and `conflict` when an entry id belongs to
    /// another playlist.
    public func importRecords(_ records: [CatalogRecord], completion: @escaping @Sendable (Result<ImportSummary, any Error>) -> Void) {
        let items = self.items
        database.writes.submit(atomic: true, { db in
            var summary = ImportSummary()
            for (index, record) in records.enumerated() {
                let outcome: ImportOutcome = switch record {
                case let .game(game):
                    try Self.upsert(GameTable.self, db, game.id, GameInput(game), (game.createdAt, game.updatedAt, game.version))
                case let .location(location):
                    try Self.upsert(LocationTable.self, db, location.id, LocationInput(location),
                                    (location.createdAt, location.updatedAt, location.version))
                case let .playableItem(item):
                    try Self.upsert(PlayableItemTable.self, db, item.id, PlayableItemInput(item), (item.createdAt, item.updatedAt, item.version))
                case let .playlist(playlist):
                    try Self.importPlaylist(db, playlist, pointer: "/records/\(index)/data")
                case let .comment(comment):
                    try Self.importComment(db, comment, pointer: "/records/\(index)/data")
                }
                switch outcome {
                case .created: summary.created += 1
                case .updated: summary.updated += 1
                case .unchanged: summary.unchanged += 1
                }
            }
            // Reply counts follow the replies actually there: a thread whose count the records
            // got wrong, or that gained a reply only here, is corrected (a change: version + 1).
            var threads = Set<String>()
            for case let .comment(comment) in records { threads.insert((comment.parentId ?? comment.id).rawValue) }
            let recount = try db.cachedStatement(sql: """
                UPDATE comments SET reply_count = (SELECT count(*) FROM comments r WHERE r.parent_id = comments.id), version = version + 1
                WHERE id = ? AND reply_count != (SELECT count(*) FROM comments r WHERE r.parent_id = comments.id)
                """)
            for id in threads.sorted() { try recount.execute(arguments: [id]) }
            return summary
        }, completion: { result in
            // Imported items may come back at a version the render cache saw with other content.
            if case .success = result {
                for case let .playableItem(item) in records { items.cache?.invalidate(id: item.id.rawValue) }
            }
            completion(result.mapError { StoreError.from($0) })
        })
    }

    private enum ImportOutcome { case created, updated, unchanged }

    private typealias Stamps = (createdAt: Date, updatedAt: Date, version: Int)

    /// Creates, changes or keeps one row of a resource table.
    private static func upsert<Table: ResourceTable>(_ table: Table.Type, _ db: Database, _ id: CatalogID, _ input: Table.Input,
                                                     _ stamps: Stamps) throws -> ImportOutcome {
        let values = Table.values(input)
        let imported = values.map { $0?.databaseValue ?? .null }
        let select = "SELECT \(Table.dataColumns.joined(separator: ", ")) FROM \(Table.table) WHERE id = ?"
        if let row = try Row.fetchOne(db.cachedStatement(sql: select), arguments: [id.rawValue]) {
            guard Table.dataColumns.indices.map({ row[$0] as DatabaseValue }) != imported else { return .unchanged }
            let assignments = Table.dataColumns.map { "\($0) = ?" }.joined(separator: ", ")
            try db.cachedStatement(sql: "UPDATE \(Table.table) SET \(assignments), updated_at = max(?, created_at), version = max(version + 1, ?) WHERE id = ?")
                .execute(arguments: StatementArguments(values + [Timestamp.milliseconds(stamps.updatedAt), stamps.version, id.rawValue]))
            return .updated
        }
        try db.cachedStatement(sql: Table.insertSQL).execute(arguments: StatementArguments(
            [id.rawValue] + values + [Timestamp.milliseconds(stamps.createdAt), Timestamp.milliseconds(stamps.updatedAt), stamps.version]))
        return .created
    }

    /// A playlist's own fields, then its entries when they differ (which is a change too).
    private static func importPlaylist(_ db: Database, _ record: PlaylistRecord, pointer: String) throws -> ImportOutcome {
        var outcome = try upsert(PlaylistTable.self, db, record.id, PlaylistInput(title: record.title, description: record.description),
                                 (record.createdAt, record.updatedAt, record.version))
        guard let playlistPK = try Int64.fetchOne(db.cachedStatement(sql: "SELECT pk FROM playlists WHERE id = ?"), arguments: [record.id.rawValue])
        else { throw StoreError.notFound }
        let current = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT e.id AS entry, i.id AS item FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk
            WHERE e.playlist_pk = ? ORDER BY e.position
            """), arguments: [playlistPK]).map { (entry: $0["entry"] as String, item: $0["item"] as String) }
        guard !current.elementsEqual(record.entries, by: { $0.entry == $1.entryId.rawValue && $0.item == $1.playableItemId.rawValue }) else {
            return outcome
        }
        try db.cachedStatement(sql: "DELETE FROM playlist_entries WHERE playlist_pk = ?").execute(arguments: [playlistPK])
        let insert = try db.cachedStatement(sql: """
            INSERT INTO playlist_entries (id, playlist_pk, item_pk, position, created_at)
            SELECT ?, ?, pk, ?, ? FROM playable_items WHERE id = ?
            """)
        var missing: [FieldError] = []
        for (position, entry) in record.entries.enumerated() {
            try insert.execute(arguments: [entry.entryId.rawValue, playlistPK, position, Timestamp.milliseconds(entry.addedAt), entry.playableItemId.rawValue])
            if db.changesCount == 0 {
                missing.append(Violation(.notFound, "No playable item has this id.").at("\(pointer)/entries/\(position)/playableItemId"))
            }
        }
        guard missing.isEmpty else { throw StoreError.invalid(Array(missing.prefix(PlaylistEntryStore.maxListedErrors))) }
        try db.cachedStatement(sql: "UPDATE playlists SET entry_count = ? WHERE pk = ?").execute(arguments: [record.entries.count, playlistPK])
        if outcome == .unchanged {
            try db.cachedStatement(sql: "UPDATE playlists SET updated_at = max(?, created_at), version = max(version + 1, ?) WHERE pk = ?")
                .execute(arguments: [Timestamp.milliseconds(record.updatedAt), record.version, playlistPK])
            outcome = .updated
        }
        return outcome
    }

    /// A comment: its text and tombstone state change; its item and parent must exist.
    private static func importComment(_ db: Database, _ comment: Comment, pointer: String) throws -> ImportOutcome {
        let values: [(any DatabaseValueConvertible)?] = [comment.author, comment.deleted ? nil : comment.body, comment.deleted]
        if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT author, body, deleted, playable_item_id, parent_id FROM comments WHERE id = ?"),
                                      arguments: [comment.id.rawValue]) {
            guard row["playable_item_id"] as String == comment.playableItemId.rawValue, row["parent_id"] as String? == comment.parentId?.rawValue else {
                throw StoreError.conflict("Comment \(comment.id) exists in another thread.")
            }
            guard (0..<3).map({ row[$0] as DatabaseValue }) != values.map({ $0?.databaseValue ?? .null }) else { return .unchanged }
            try db.cachedStatement(sql: """
                UPDATE comments SET author = ?, body = ?, deleted = ?, updated_at = max(?, created_at), version = max(version + 1, ?) WHERE id = ?
                """).execute(arguments: StatementArguments(values + [Timestamp.milliseconds(comment.updatedAt), comment.version, comment.id.rawValue]))
            return .updated
        }
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM playable_items WHERE id = ?"), arguments: [comment.playableItemId.rawValue]) != nil else {
            throw StoreError.invalid([Violation(.notFound, "No playable item has this id.").at("\(pointer)/playableItemId")])
        }
        if let parentID = comment.parentId {
            let parent = try Row.fetchOne(db.cachedStatement(sql: "SELECT playable_item_id, parent_id FROM comments WHERE id = ?"), arguments: [parentID.rawValue])
            guard let parent, parent["playable_item_id"] as String == comment.playableItemId.rawValue, parent["parent_id"] as String? == nil else {
                throw StoreError.invalid([Violation(.invalidParent, "Must be a top-level comment on the same item, imported earlier.").at("\(pointer)/parentId")])
            }
        }
        try db.cachedStatement(sql: """
            INSERT INTO comments (id, playable_item_id, parent_id, author, body, deleted, reply_count, created_at, updated_at, version)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: StatementArguments([comment.id.rawValue, comment.playableItemId.rawValue, comment.parentId?.rawValue] + values + [
                comment.replyCount, Timestamp.milliseconds(comment.createdAt), Timestamp.milliseconds(comment.updatedAt), comment.version,
            ]))
        return .created
    }
}
