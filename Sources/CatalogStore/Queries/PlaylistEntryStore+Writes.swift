import CatalogModels
import CatalogSchema
import Foundation

/// Writes to a playlist's entries, durable when their completion runs: insert, move,
/// remove, and a whole order replaced.
extension PlaylistEntryStore {
    /// Inserts the item `values` name (read by ``PlaylistEntrySchema/insertion``) at their
    /// position (appends when absent): the entries from there on move one place down,
    /// and only the new entry's row is written (rarely a few more: ``EntryOrder``). Fails with
    /// `invalid` naming the item (unknown) or the position (past the end), and
    /// `conflict` when the playlist is full.
    package func insert(
        _ values: FieldValues, into playlistID: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void
    ) {
        let entryID = CatalogID()
        database.submit(
            options, atomic: true,
            { [self] db in
                // The item first (it may not go until this commits), then the playlist: the order
                // an item's deletion takes them in.
                let item = values.reference(to: .playableItems)
                let itemPK = try item?.value?.text.flatMap { id in
                    try db.fetchValue("SELECT pk FROM playable_items WHERE id = ?" + db.dialect.forKeyShare, [id]).int64
                }
                let playlist = try Self.lock(db, playlistID, preconditions)
                var errors: [FieldError] = []
                if let item, itemPK == nil { errors.append(Reference.playableItems.missing.at(item.field.pointer)) }
                let position = values[column: "position"]?.integer.map(Int.init) ?? playlist.count
                if !(0...playlist.count).contains(position), let field = values.field(column: "position") {
                    errors.append(Violation(.outOfRange, "Must be from 0 to \(playlist.count), the number of entries.").at(field.pointer))
                }
                guard let itemPK, errors.isEmpty else { throw StoreError.invalid(errors) }
                guard playlist.count < Self.maxEntries else {
                    throw StoreError.conflict("The playlist is full: it holds the maximum of \(Self.maxEntries) entries.")
                }
                try Self.checkOwnersTotal(db, playlistPK: playlist.pk, adding: 1)
                let key = try Self.key(db, playlistPK: playlist.pk, others: playlist.count, at: position, moving: nil)
                try db.execute(
                    "INSERT INTO playlist_entries (id, playlist_pk, item_pk, sort_key, created_at) VALUES (?, ?, ?, ?, ?)",
                    [entryID.rawValue, playlist.pk, itemPK, key, Timestamp.milliseconds(Date())])
                let version = try Self.touch(db, playlist.pk, count: playlist.count + 1)
                return try renderEntry(db, entryID, version: version)
            }, completion: Self.found(completion))
    }

    /// Inserts `input`, checked as a body.
    public func insert(
        _ input: PlaylistEntryInput, into playlistID: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void
    ) {
        guard let values = readValues(input, PlaylistEntrySchema.insertion, failing: completion) else { return }
        insert(values, into: playlistID, preconditions: preconditions, options: options, completion: completion)
    }

    /// Moves the entry `entryID` to the position `values` hold (read by ``PlaylistEntrySchema/move``).
    package func move(
        _ entryID: CatalogID, of playlistID: CatalogID, _ values: FieldValues, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void
    ) {
        guard let position = values[column: "position"]?.integer else { return completion(.failure(StoreError.invalid([]))) }
        move(entryID, of: playlistID, to: Int(position), preconditions: preconditions, options: options, completion: completion)
    }

    /// Moves the entry `entryID` to `position` (0…count−1): the entries between move one
    /// place, and only the moved entry's row is written (rarely a few more: ``EntryOrder``).
    public func move(
        _ entryID: CatalogID, of playlistID: CatalogID, to position: Int, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void
    ) {
        database.submit(
            options, atomic: true,
            { [self] db in
                let (playlist, entry) = try Self.lock(db, playlistID, entry: entryID, preconditions)
                guard (0..<playlist.count).contains(position) else {
                    let pointer = PlaylistEntrySchema.move.fields.first { $0.column == "position" }?.pointer ?? ""
                    throw StoreError.invalid([Violation(.outOfRange, "Must be from 0 to \(playlist.count - 1), the last position.").at(pointer)])
                }
                // Among the other entries, its place is `position`; a key already there stays.
                let key = try Self.key(db, playlistPK: playlist.pk, others: playlist.count - 1, at: position, moving: entry)
                if key != entry.key {
                    try db.execute("UPDATE playlist_entries SET sort_key = ?, version = version + 1 WHERE pk = ?", [key, entry.pk])
                }
                let version = try Self.touch(db, playlist.pk, count: playlist.count)
                return try renderEntry(db, entryID, version: version)
            }, completion: Self.found(completion))
    }

    /// Removes the entry `entryID` (the entries after it move one place up; no other row
    /// is written). Returns the playlist's new version.
    public func remove(
        _ entryID: CatalogID, from playlistID: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<Int, any Error>) -> Void
    ) {
        database.submit(
            options, atomic: true,
            { db in
                let (playlist, entry) = try Self.lock(db, playlistID, entry: entryID, preconditions)
                try db.execute("DELETE FROM playlist_entries WHERE pk = ?", [entry.pk])
                return try Self.touch(db, playlist.pk, count: playlist.count - 1)
            }, completion: Self.mapped(completion))
    }

    /// Replaces the whole order with `order`. Entries of items that stay keep their ids
    /// (the first remaining entry of an item goes to the item's first new place, and so
    /// on); the others are removed or added. Fails with `invalid` naming each unknown
    /// id (its pointer; the answer lists ``Problem/maxListedErrors`` and counts the rest).
    /// Returns the playlist.
    public func replace(
        _ order: PlaylistOrder, of playlistID: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        guard let values = readValues(order, PlaylistEntrySchema.order, failing: completion) else { return }
        replace(values, of: playlistID, preconditions: preconditions, options: options, completion: completion)
    }

    /// Replaces the whole order with the item ids `values` hold (read by ``PlaylistEntrySchema/order``).
    package func replace(
        _ values: FieldValues, of playlistID: CatalogID, preconditions: WritePreconditions, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        guard let items = values.reference(to: .playableItems), case let .ids(ids)? = items.value else {
            return completion(.failure(StoreError.invalid([])))
        }
        // A long order takes its own turn on the writer, so it cannot hold up small writes.
        database.submit(
            options, atomic: true, heavy: ids.count > 100,
            { [self] db in
                let playlist = try Self.lock(db, playlistID, preconditions)
                // The items, in the new order (ids are UUID text: nothing to escape).
                var itemPKs: [Int64] = []
                itemPKs.reserveCapacity(ids.count)
                var unknown: [Int] = []
                let resolved = try db.fetchColumn(
                    "SELECT i.pk FROM \(db.dialect.jsonElements("j")) LEFT JOIN playable_items i ON i.id = j.value ORDER BY j.key",
                    [JSONArrayParameter.text(ids.lazy.map(\.rawValue), quoted: true)])
                for pk in resolved {
                    if pk == .null { unknown.append(itemPKs.count) }
                    itemPKs.append(pk.int64 ?? 0)
                }
                guard unknown.isEmpty else {
                    // Every one, so the answer can count those it does not list (at most 10,000).
                    throw StoreError.invalid(
                        unknown.map { offset in
                            Reference.playableItems.missing.at(items.field.pointer + "/\(offset)")
                        })
                }
                // The current entries of each item, in order.
                var current: [Int64: [(pk: Int64, key: Int64)]] = [:]
                let entries = try db.query("SELECT pk, item_pk, sort_key FROM playlist_entries WHERE playlist_pk = ? ORDER BY sort_key", [playlist.pk])
                while try entries.step() {
                    current[entries.integer(1), default: []].append((entries.integer(0), entries.integer(2)))
                }
                // The k-th entry of an item keeps its id and moves to the item's k-th new place.
                var used: [Int64: Int] = [:]
                // `order[p]`: the kept entry that goes to place p, or nil for a new entry there.
                var order: [(pk: Int64, key: Int64)?] = []
                order.reserveCapacity(itemPKs.count)
                for itemPK in itemPKs {
                    let taken = used[itemPK, default: 0]
                    if let kept = current[itemPK], taken < kept.count {
                        used[itemPK] = taken + 1
                        order.append(kept[taken])
                    } else {
                        order.append(nil)
                    }
                }
                var removals: [String] = []
                for (itemPK, kept) in current {
                    for entry in kept[(used[itemPK] ?? 0)...] { removals.append(String(entry.pk)) }
                }
                // Kept entries already in order keep their keys; only the others are written.
                let keys = EntryOrder.keys(for: order.map { $0?.key })
                var moves: [(pk: Int64, key: Int64)] = [], additions: [String] = []
                for (place, kept) in order.enumerated() {
                    if let kept {
                        if kept.key != keys[place] { moves.append((kept.pk, keys[place])) }
                    } else {
                        additions.append("[\"\(CatalogID().rawValue)\",\(itemPKs[place]),\(keys[place])]")
                    }
                }
                // Three statements, whatever the size.
                if !removals.isEmpty {
                    try db.execute(
                        "DELETE FROM playlist_entries WHERE pk IN (SELECT CAST(r.value AS BIGINT) FROM \(db.dialect.jsonElements("r")))",
                        [JSONArrayParameter.text(removals)])
                }
                try Self.rekey(db, moves)
                if !additions.isEmpty {
                    let dialect = db.dialect
                    try db.execute(
                        """
                        INSERT INTO playlist_entries (id, playlist_pk, item_pk, sort_key, created_at)
                        SELECT \(dialect.jsonElement("a.value", 0)), CAST(? AS BIGINT), CAST(\(dialect.jsonElement("a.value", 1)) AS BIGINT),
                            CAST(\(dialect.jsonElement("a.value", 2)) AS BIGINT), CAST(? AS BIGINT) FROM \(dialect.jsonElements("a"))
                        """, [playlist.pk, Timestamp.milliseconds(Date()), JSONArrayParameter.text(additions)])
                }
                try Self.checkOwnersTotal(db, playlistPK: playlist.pk, adding: itemPKs.count - playlist.count)
                _ = try Self.touch(db, playlist.pk, count: itemPKs.count)
                guard let rendered = try playlists.render(db, playlistID) else { throw StoreError.notFound }
                return rendered
            }, completion: Self.mapped(completion))
    }
}
