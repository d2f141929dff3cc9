import CatalogModels
import CatalogSchema
import Foundation
import GRDB
import GRDBSQLite

/// A playlist entry as its JSON document, with the playlist's version after the read or
/// write (the `ETag` of entry responses).
public struct RenderedEntry: Sendable {
    /// The entry's id.
    public let entryID: CatalogID
    /// The playlist's version.
    public let playlistVersion: Int
    /// The entry's JSON, its playable item embedded.
    public let json: [UInt8]
}

/// The ordered entries of playlists. Positions are dense (0…n−1) after every write:
/// each write locks the playlist's row by writing it (version + 1), shifts the
/// positions between the old and the new place in one statement, and answers once durable.
public final class PlaylistEntryStore: Sendable {
    private let database: CatalogDatabase
    private let playlists: ResourceStore<Playlist, PlaylistInput>
    /// Renders entries as declared (``PlaylistEntrySchema/document``), their item embedded.
    private let renderer = RowRenderer(PlaylistEntrySchema.document)
    /// The items' rendering cache, shared with their own lists.
    private let itemCache: RenderCache?
    /// The renderer's columns, from the entry, its playlist and its item.
    private let selectSQL: String
    /// Where the entry's id and position are among them.
    private let idColumn: Int32
    private let positionColumn: Int32

    /// The most entries a playlist holds.
    public static let maxEntries = PlaylistOrder.maxEntries

    init(database: CatalogDatabase, playlists: ResourceStore<Playlist, PlaylistInput>, items: ResourceStore<PlayableItem, PlayableItemInput>) {
        self.database = database
        self.playlists = playlists
        itemCache = items.cache
        let columns = renderer.selectList(own: { $0.column == "playlist_id" ? "p.id" : "e." + $0.column }, nested: { "i." + $0.column })
        selectSQL = "SELECT \(columns.joined(separator: ", ")) FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk"
            + " JOIN playlists p ON p.pk = e.playlist_pk"
        idColumn = renderer.index(of: "id")
        positionColumn = renderer.index(of: "position")
    }

    // MARK: Reads

    /// One page of the entries of `playlistID`, in position order; `fields` masks each
    /// entry's playable item. Fails with `notFound` when the playlist does not exist.
    public func page(of playlistID: CatalogID, limit: Int, cursor: String?, fields: FieldMask = .all) throws(StoreError)
        -> (json: [UInt8], nextCursor: String?) {
        let after = try cursor.map { text throws(StoreError) in try Self.decodeCursor(text, playlistID: playlistID) }
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                guard let pk = try Self.playlistPK(db, playlistID) else { throw StoreError.notFound }
                var writer = JSONWriter(capacity: 256 + limit * 600)
                let next = try renderPage(db, playlistID: playlistID, pk: pk, after: after ?? -1, limit: limit, fields: fields, epoch: epoch,
                                          into: &writer)
                return (writer.bytes, next)
            }
        }
    }

    /// Writes the first page of entries (for `include=entries`), read in `db`'s snapshot
    /// (taken in render-cache `epoch`).
    func firstPage(_ db: Database, playlistID: CatalogID, limit: Int, epoch: UInt64, into writer: inout JSONWriter) throws {
        guard let pk = try Self.playlistPK(db, playlistID) else { throw StoreError.notFound }
        _ = try renderPage(db, playlistID: playlistID, pk: pk, after: -1, limit: limit, fields: .all, epoch: epoch, into: &writer)
    }

    /// Writes a page of entries; returns the next page's cursor.
    private func renderPage(_ db: Database, playlistID: CatalogID, pk: Int64, after: Int64, limit: Int, fields: FieldMask, epoch: UInt64,
                            into writer: inout JSONWriter) throws -> String? {
        let rows = try RawRows(db, sql: selectSQL + " WHERE e.playlist_pk = ? AND e.position > ? ORDER BY e.position LIMIT ?",
                               arguments: [pk, after, limit + 1])
        return try rows.writePage(limit: limit, into: &writer, item: { statement, writer in
            try render(statement, fields: fields, epoch: epoch, into: &writer)
        }, cursor: { [idColumn, positionColumn] statement in
            ListCursor(fingerprint: Self.fingerprint(playlistID), key: .integer(sqlite3_column_int64(statement, positionColumn)),
                       id: String(decoding: RowRenderer.text(statement, idColumn), as: UTF8.self)).encoded()
        })
    }

    /// The entry `entryID` of `playlistID`, or `nil` when either does not exist.
    public func entry(_ entryID: CatalogID, of playlistID: CatalogID, fields: FieldMask = .all) throws(StoreError) -> RenderedEntry? {
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                guard let playlist = try Self.playlist(db, playlistID), let position = try Self.position(db, entryID, playlistPK: playlist.pk)
                else { return nil }
                return try renderEntry(db, playlistPK: playlist.pk, position: position,
                                       version: playlist.version, fields: fields, epoch: epoch)
            }
        }
    }

    /// What plays after an entry: the next entry, or nothing at the end of the playlist.
    public enum UpNext: Sendable {
        case entry(RenderedEntry)
        case endOfPlaylist
    }

    /// The entry after `entryID` ("up next"), or ``UpNext/endOfPlaylist`` when the entry
    /// is the last. Fails with `notFound` when the playlist or the entry does not exist.
    public func next(after entryID: CatalogID, of playlistID: CatalogID, fields: FieldMask = .all) throws(StoreError) -> UpNext {
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                guard let playlist = try Self.playlist(db, playlistID), let position = try Self.position(db, entryID, playlistPK: playlist.pk)
                else { throw StoreError.notFound }
                let next = try renderEntry(db, playlistPK: playlist.pk, position: position + 1, version: playlist.version, fields: fields, epoch: epoch)
                return next.map(UpNext.entry) ?? .endOfPlaylist
            }
        }
    }

    // MARK: Writes (durable when the completion runs)

    /// Inserts the item `values` name (read by ``PlaylistEntrySchema/insertion``) at their
    /// position (appends when absent), shifting the entries from there on. Fails with
    /// `invalid` naming the item (unknown) or the position (past the end), and
    /// `conflict` when the playlist is full.
    package func insert(_ values: FieldValues, into playlistID: CatalogID, preconditions: WritePreconditions,
                        completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void) {
        let entryID = CatalogID()
        database.writes.submit(atomic: true, { [self] db in
            let playlist = try Self.lock(db, playlistID, preconditions)
            var errors: [FieldError] = []
            let item = values.reference(to: .playableItems)
            let itemPK = try item?.value?.text.flatMap { id in
                try Int64.fetchOne(db.cachedStatement(sql: "SELECT pk FROM playable_items WHERE id = ?"), arguments: [id])
            }
            if let item, itemPK == nil { errors.append(Reference.playableItems.missing.at(item.field.pointer)) }
            let position = values[column: "position"]?.integer.map(Int.init) ?? playlist.count
            if !(0...playlist.count).contains(position), let field = values.field(column: "position") {
                errors.append(Violation(.outOfRange, "Must be from 0 to \(playlist.count), the number of entries.").at(field.pointer))
            }
            guard let itemPK, errors.isEmpty else { throw StoreError.invalid(errors) }
            guard playlist.count < Self.maxEntries else {
                throw StoreError.conflict("The playlist is full: it holds the maximum of \(Self.maxEntries) entries.")
            }
            let now = Timestamp.milliseconds(Date())
            try db.cachedStatement(sql: "UPDATE playlist_entries SET position = position + 1 WHERE playlist_pk = ? AND position >= ?")
                .execute(arguments: [playlist.pk, position])
            try db.cachedStatement(sql: "INSERT INTO playlist_entries (id, playlist_pk, item_pk, position, created_at) VALUES (?, ?, ?, ?, ?)")
                .execute(arguments: [entryID.rawValue, playlist.pk, itemPK, position, now])
            let version = try Self.touch(db, playlist.pk, count: playlist.count + 1)
            return try renderEntry(db, playlistPK: playlist.pk, position: Int64(position), version: version)
        }, completion: Self.found(completion))
    }

    /// Inserts `input`, checked as a body.
    public func insert(_ input: PlaylistEntryInput, into playlistID: CatalogID, preconditions: WritePreconditions,
                       completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void) {
        switch readValues(input, PlaylistEntrySchema.insertion) {
        case let .success(values): insert(values, into: playlistID, preconditions: preconditions, completion: completion)
        case let .failure(error): completion(.failure(error))
        }
    }

    /// Moves the entry `entryID` to the position `values` hold (read by ``PlaylistEntrySchema/move``).
    package func move(_ entryID: CatalogID, of playlistID: CatalogID, _ values: FieldValues, preconditions: WritePreconditions,
                      completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void) {
        guard let position = values[column: "position"]?.integer else { return completion(.failure(StoreError.invalid([]))) }
        move(entryID, of: playlistID, to: Int(position), preconditions: preconditions, completion: completion)
    }

    /// Moves the entry `entryID` to `position` (0…count−1), shifting the entries between.
    public func move(_ entryID: CatalogID, of playlistID: CatalogID, to position: Int, preconditions: WritePreconditions,
                     completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void) {
        database.writes.submit(atomic: true, { [self] db in
            let (playlist, old) = try Self.lock(db, playlistID, entry: entryID, preconditions)
            guard (0..<playlist.count).contains(position) else {
                let pointer = PlaylistEntrySchema.move.fields.first { $0.column == "position" }?.pointer ?? ""
                throw StoreError.invalid([Violation(.outOfRange, "Must be from 0 to \(playlist.count - 1), the last position.").at(pointer)])
            }
            let new = Int64(position)
            if new < old {
                try db.cachedStatement(sql: "UPDATE playlist_entries SET position = position + 1 WHERE playlist_pk = ? AND position >= ? AND position < ?")
                    .execute(arguments: [playlist.pk, new, old])
            } else if new > old {
                try db.cachedStatement(sql: "UPDATE playlist_entries SET position = position - 1 WHERE playlist_pk = ? AND position > ? AND position <= ?")
                    .execute(arguments: [playlist.pk, old, new])
            }
            try db.cachedStatement(sql: "UPDATE playlist_entries SET position = ? WHERE id = ?").execute(arguments: [new, entryID.rawValue])
            let version = try Self.touch(db, playlist.pk, count: playlist.count)
            return try renderEntry(db, playlistPK: playlist.pk, position: new, version: version)
        }, completion: Self.found(completion))
    }

    /// Removes the entry `entryID`, closing the gap. Returns the playlist's new version.
    public func remove(_ entryID: CatalogID, from playlistID: CatalogID, preconditions: WritePreconditions,
                       completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        database.writes.submit(atomic: true, { db in
            let (playlist, old) = try Self.lock(db, playlistID, entry: entryID, preconditions)
            try db.cachedStatement(sql: "DELETE FROM playlist_entries WHERE id = ?").execute(arguments: [entryID.rawValue])
            try db.cachedStatement(sql: "UPDATE playlist_entries SET position = position - 1 WHERE playlist_pk = ? AND position > ?")
                .execute(arguments: [playlist.pk, old])
            return try Self.touch(db, playlist.pk, count: playlist.count - 1)
        }, completion: Self.mapped(completion))
    }

    /// Replaces the whole order with `order`. Entries of items that stay keep their ids
    /// (the first remaining entry of an item goes to the item's first new place, and so
    /// on); the others are removed or added. Fails with `invalid` naming each unknown
    /// id (its pointer, at most ``DocumentShape/maxListedErrors``). Returns the playlist.
    public func replace(_ order: PlaylistOrder, of playlistID: CatalogID, preconditions: WritePreconditions,
                        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        switch readValues(order, PlaylistEntrySchema.order) {
        case let .success(values): replace(values, of: playlistID, preconditions: preconditions, completion: completion)
        case let .failure(error): completion(.failure(error))
        }
    }

    /// Replaces the whole order with the item ids `values` hold (read by ``PlaylistEntrySchema/order``).
    package func replace(_ values: FieldValues, of playlistID: CatalogID, preconditions: WritePreconditions,
                         completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void) {
        guard let items = values.reference(to: .playableItems), case let .ids(ids)? = items.value else {
            return completion(.failure(StoreError.invalid([])))
        }
        // A long order takes its own turn on the writer, so it cannot hold up small writes.
        database.writes.submit(atomic: true, heavy: ids.count > 100, { [self] db in
            let playlist = try Self.lock(db, playlistID, preconditions)
            // The items, in the new order (ids are UUID text: nothing to escape).
            var itemPKs: [Int64] = []
            itemPKs.reserveCapacity(ids.count)
            var unknown: [Int] = []
            let resolve = try RawRows(db, sql: "SELECT i.pk FROM json_each(?) j LEFT JOIN playable_items i ON i.id = j.value ORDER BY j.key",
                                      arguments: [Self.jsonArray(ids.lazy.map(\.rawValue), quoted: true)])
            while try resolve.step() {
                if sqlite3_column_type(resolve.statement, 0) == SQLITE_NULL { unknown.append(itemPKs.count) }
                itemPKs.append(sqlite3_column_int64(resolve.statement, 0))
            }
            guard unknown.isEmpty else {
                throw StoreError.invalid(unknown.prefix(DocumentShape.maxListedErrors).map { offset in
                    Reference.playableItems.missing.at(items.field.pointer + "/\(offset)")
                })
            }
            // The current entries of each item, in position order.
            var current: [Int64: [(pk: Int64, position: Int)]] = [:]
            let entries = try RawRows(db, sql: "SELECT pk, item_pk, position FROM playlist_entries WHERE playlist_pk = ? ORDER BY position",
                                      arguments: [playlist.pk])
            while try entries.step() {
                current[sqlite3_column_int64(entries.statement, 1), default: []]
                    .append((sqlite3_column_int64(entries.statement, 0), Int(sqlite3_column_int64(entries.statement, 2))))
            }
            // The k-th entry of an item keeps its id and moves to the item's k-th new place.
            var used: [Int64: Int] = [:]
            // `order[p]` is the kept entry that goes to position p (0: a new entry goes there).
            var order: [String] = [], additions: [String] = [], removals: [String] = []
            order.reserveCapacity(itemPKs.count)
            var moved = false
            for (position, itemPK) in itemPKs.enumerated() {
                let taken = used[itemPK, default: 0]
                if let kept = current[itemPK], taken < kept.count {
                    used[itemPK] = taken + 1
                    order.append(String(kept[taken].pk))
                    moved = moved || kept[taken].position != position
                } else {
                    order.append("0")
                    additions.append("[\"\(CatalogID().rawValue)\",\(itemPK),\(position)]")
                }
            }
            for (itemPK, kept) in current {
                for entry in kept[(used[itemPK] ?? 0)...] { removals.append(String(entry.pk)) }
            }
            // Three statements, whatever the size.
            if !removals.isEmpty {
                try db.cachedStatement(sql: "DELETE FROM playlist_entries WHERE pk IN (SELECT value FROM json_each(?))")
                    .execute(arguments: [Self.jsonArray(removals)])
            }
            if moved {
                try db.cachedStatement(sql: """
                    UPDATE playlist_entries SET position = m.key
                    FROM json_each(?) m WHERE playlist_entries.pk = m.value AND playlist_entries.position != m.key
                    """).execute(arguments: [Self.jsonArray(order)])
            }
            if !additions.isEmpty {
                try db.cachedStatement(sql: """
                    INSERT INTO playlist_entries (id, playlist_pk, item_pk, position, created_at)
                    SELECT json_extract(value, '$[0]'), ?, json_extract(value, '$[1]'), json_extract(value, '$[2]'), ? FROM json_each(?)
                    """).execute(arguments: [playlist.pk, Timestamp.milliseconds(Date()), Self.jsonArray(additions)])
            }
            _ = try Self.touch(db, playlist.pk, count: itemPKs.count)
            guard let rendered = try playlists.render(db, playlistID) else { throw StoreError.notFound }
            return rendered
        }, completion: Self.mapped(completion))
    }

    /// A JSON array of already-encoded elements, or of strings needing no escapes when
    /// `quoted` (a bound parameter for `json_each`), built in one buffer.
    private static func jsonArray(_ elements: some Sequence<String>, quoted: Bool = false) -> String {
        var text = "["
        text.reserveCapacity(elements.underestimatedCount * (quoted ? 40 : 8) + 2)
        for (index, element) in elements.enumerated() {
            if index > 0 { text.append(",") }
            if quoted { text.append("\"") }
            text.append(element)
            if quoted { text.append("\"") }
        }
        text.append("]")
        return text
    }

    /// Applies the entries of a playlist's import record (their ids, items and order) to
    /// the playlist `playlistPK` when they differ from its current ones.
    /// - Returns: whether they did (a change of the playlist).
    static func importEntries(_ db: Database, _ record: FieldValues, playlistPK: Int64, pointer: String) throws -> Bool {
        guard let index = record.fields.firstIndex(where: { if case .documents = $0.kind { true } else { false } }),
              case let .documents(entries)? = record.values[index] else { return false }
        let member = pointer + record.fields[index].pointer
        func item(_ entry: FieldValues) -> String? { entry.reference(to: .playableItems)?.value?.text }
        let current = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT e.id AS entry, i.id AS item FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk
            WHERE e.playlist_pk = ? ORDER BY e.position
            """), arguments: [playlistPK]).map { (entry: $0["entry"] as String, item: $0["item"] as String) }
        guard !current.elementsEqual(entries, by: { $0.entry == $1[column: "id"]?.text && $0.item == item($1) }) else { return false }
        try db.cachedStatement(sql: "DELETE FROM playlist_entries WHERE playlist_pk = ?").execute(arguments: [playlistPK])
        let insert = try db.cachedStatement(sql: """
            INSERT INTO playlist_entries (id, playlist_pk, item_pk, position, created_at)
            SELECT ?, ?, pk, ?, ? FROM playable_items WHERE id = ?
            """)
        var missing: [FieldError] = []
        for (position, entry) in entries.enumerated() {
            try insert.execute(arguments: [entry[column: "id"]?.databaseValue, playlistPK, position, entry[column: "created_at"]?.databaseValue, item(entry)])
            if db.changesCount == 0, let reference = entry.reference(to: .playableItems) {
                missing.append(Reference.playableItems.missing.at(member + "/\(position)" + reference.field.pointer))
            }
        }
        guard missing.isEmpty else { throw StoreError.invalid(Array(missing.prefix(DocumentShape.maxListedErrors))) }
        try db.cachedStatement(sql: "UPDATE playlists SET entry_count = ? WHERE pk = ?").execute(arguments: [entries.count, playlistPK])
        return true
    }

    /// Removes every entry of the item `itemID` from every playlist, keeping positions
    /// dense and bumping each playlist's version. Runs inside the item's deletion.
    static func removeItem(_ db: Database, itemID: CatalogID) throws {
        guard let itemPK = try Int64.fetchOne(db.cachedStatement(sql: "SELECT pk FROM playable_items WHERE id = ?"), arguments: [itemID.rawValue])
        else { return }
        let affected = try Int64.fetchAll(db.cachedStatement(sql: "SELECT DISTINCT playlist_pk FROM playlist_entries WHERE item_pk = ?"),
                                          arguments: [itemPK])
        guard !affected.isEmpty else { return }
        try db.cachedStatement(sql: "DELETE FROM playlist_entries WHERE item_pk = ?").execute(arguments: [itemPK])
        for playlistPK in affected {
            try db.cachedStatement(sql: """
                UPDATE playlist_entries SET position = ranked.position
                FROM (SELECT pk, row_number() OVER (ORDER BY position) - 1 AS position FROM playlist_entries WHERE playlist_pk = ?) AS ranked
                WHERE playlist_entries.pk = ranked.pk AND playlist_entries.position != ranked.position
                """).execute(arguments: [playlistPK])
            let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM playlist_entries WHERE playlist_pk = ?"),
                                         arguments: [playlistPK]) ?? 0
            _ = try touch(db, playlistPK, count: count)
        }
    }

    // MARK: Helpers

    /// Appends an entry from the statement's current row, its item showing `fields`.
    /// Reads pass the render-cache `epoch` of their snapshot; writes pass `nil` and never
    /// touch the cache (what they render might not commit).
    private func render(_ statement: SQLiteStatement, fields: FieldMask, epoch: UInt64?, into writer: inout JSONWriter) throws {
        try renderer.render(statement, into: &writer, nested: (fields, epoch == nil ? nil : itemCache, epoch ?? 0))
    }

    /// The entry at `position`, or `nil` when there is none.
    private func renderEntry(_ db: Database, playlistPK: Int64, position: Int64, version: Int,
                             fields: FieldMask = .all, epoch: UInt64? = nil) throws -> RenderedEntry? {
        let rows = try RawRows(db, sql: selectSQL + " WHERE e.playlist_pk = ? AND e.position = ?", arguments: [playlistPK, position])
        guard try rows.step() else { return nil }
        var writer = JSONWriter(capacity: 700)
        try render(rows.statement, fields: fields, epoch: epoch, into: &writer)
        guard let entryID = CatalogID(String(decoding: RowRenderer.text(rows.statement, idColumn), as: UTF8.self)) else {
            throw StoreError.unavailable("The database holds a malformed entry id.")
        }
        return RenderedEntry(entryID: entryID, playlistVersion: version, json: writer.bytes)
    }

    private static func playlistPK(_ db: Database, _ id: CatalogID) throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT pk FROM playlists WHERE id = ?"), arguments: [id.rawValue])
    }

    private static func playlist(_ db: Database, _ id: CatalogID) throws -> (pk: Int64, version: Int, count: Int)? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT pk, version, entry_count FROM playlists WHERE id = ?"), arguments: [id.rawValue])
            .map { ($0["pk"], $0["version"], $0["entry_count"]) }
    }

    /// The playlist's row after checking `preconditions` against its version. With
    /// `entry`, that entry's position too: a missing playlist or entry is `notFound`
    /// before any precondition is looked at (RFC 9110 §13.2.1).
    private static func lock(_ db: Database, _ id: CatalogID, _ preconditions: WritePreconditions) throws -> (pk: Int64, version: Int, count: Int) {
        guard let playlist = try playlist(db, id) else { throw StoreError.notFound }
        try preconditions.check(current: playlist.version)
        return playlist
    }

    private static func lock(_ db: Database, _ id: CatalogID, entry entryID: CatalogID, _ preconditions: WritePreconditions) throws
        -> (playlist: (pk: Int64, version: Int, count: Int), position: Int64) {
        guard let playlist = try playlist(db, id), let position = try position(db, entryID, playlistPK: playlist.pk) else { throw StoreError.notFound }
        try preconditions.check(current: playlist.version)
        return (playlist, position)
    }

    private static func position(_ db: Database, _ entryID: CatalogID, playlistPK: Int64) throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT position FROM playlist_entries WHERE id = ? AND playlist_pk = ?"),
                           arguments: [entryID.rawValue, playlistPK])
    }

    /// Records a change of the playlist's entries: the new count, version + 1, the time.
    /// - Returns: the new version.
    private static func touch(_ db: Database, _ playlistPK: Int64, count: Int) throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: """
            UPDATE playlists SET entry_count = ?, version = version + 1, updated_at = max(?, created_at) WHERE pk = ? RETURNING version
            """), arguments: [count, Timestamp.milliseconds(Date()), playlistPK]) ?? 0
    }

    private static func fingerprint(_ playlistID: CatalogID) -> String { "playlist_entries|\(playlistID)" }

    private static func decodeCursor(_ text: String, playlistID: CatalogID) throws(StoreError) -> Int64 {
        let cursor = try ListCursor(decoding: text, fingerprint: fingerprint(playlistID))
        guard case let .integer(position) = cursor.key, position >= 0, CatalogID(cursor.id) != nil else {
            throw .invalidCursor("The cursor is malformed.")
        }
        return position
    }

    /// Maps database errors to store errors.
    private static func mapped<T>(_ completion: @escaping @Sendable (Result<T, any Error>) -> Void) -> @Sendable (Result<T, any Error>) -> Void {
        { result in completion(result.mapError { StoreError.from($0) }) }
    }

    /// As ``mapped(_:)``, for writes that render an entry they just wrote.
    private static func found(_ completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void)
        -> @Sendable (Result<RenderedEntry?, any Error>) -> Void {
        { result in completion(result.mapError { StoreError.from($0) }.flatMap { $0.map { .success($0) } ?? .failure(StoreError.notFound) }) }
    }
}
