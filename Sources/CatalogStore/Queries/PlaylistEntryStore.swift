import CatalogModels
import CatalogSchema
import Foundation

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

/// The ordered entries of playlists. Entries are kept in the order of their keys
/// (``EntryOrder``), and positions (0…n−1) are counted when read: inserting, moving or
/// removing one entry writes its own row and its playlist's (version + 1, which locks
/// the playlist), whatever the playlist's length, and answers once durable.
public final class PlaylistEntryStore: Sendable {
    let database: any SQLDatabase
    let playlists: ResourceStore
    /// Renders entries as declared (``PlaylistEntrySchema/document``), their item embedded.
    private let renderer: RowRenderer
    /// The items' rendering cache, shared with their own lists.
    private let itemCache: RenderCache?
    /// The renderer's columns, from the entry, its playlist and its item, then the
    /// entry's key: for one entry (its position counted), and for a page (the position
    /// of the first counted once; two parameters, the playlist's pk and the key before the page).
    let selectSQL: String
    private let pageSQL: String
    /// Where the entry's id and key are among them.
    private let idColumn: Int32
    private let keyColumn: Int32
    /// Renders an entry as its changes carry it (``ChangeFeedSchema/entry``), its version after.
    private let changeRenderer = RowRenderer(ChangeFeedSchema.entry.fields.compactMap(RenderedField.init))
    private let changeSQL: String

    /// The most entries a playlist holds.
    public static let maxEntries = PlaylistOrder.maxEntries

    init(database: any SQLDatabase, playlists: ResourceStore, items: ResourceStore) {
        self.database = database
        self.playlists = playlists
        itemCache = items.cache
        let renderer = RowRenderer(PlaylistEntrySchema.document, revision: items.renderer.revision)
        self.renderer = renderer
        func select(position: String) -> String {
            let columns = renderer.selectList(
                own: { field in
                    switch field.column {
                    case "playlist_id": "p.id"
                    case "position": position
                    default: "e." + field.column
                    }
                }, nested: { "i." + $0.column })
            return "SELECT \(columns.joined(separator: ", ")), e.sort_key FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk"
                + " JOIN playlists p ON p.pk = e.playlist_pk"
        }
        selectSQL = select(position: "(SELECT count(*) FROM playlist_entries x WHERE x.playlist_pk = e.playlist_pk AND x.sort_key < e.sort_key)")
        pageSQL = select(
            position: "(SELECT count(*) FROM playlist_entries x WHERE x.playlist_pk = ? AND x.sort_key <= ?)"
                + " + row_number() OVER (ORDER BY e.sort_key) - 1")
        idColumn = renderer.index(of: "id")
        keyColumn = renderer.columnCount
        let changeColumns = changeRenderer.selectList(own: { field in
            switch field.column {
            case "playlist_id": "p.id"
            case "item_id": "i.id"
            default: "e." + field.column
            }
        })
        changeSQL =
            "SELECT \(changeColumns.joined(separator: ", ")), e.version, e.id FROM playlist_entries e JOIN playable_items i ON i.pk = e.item_pk"
            + " JOIN playlists p ON p.pk = e.playlist_pk WHERE " + database.dialect.isAmong("e.id")
    }

    /// The entries `entryIDs` as their changes in the feed carry them (``ChangedEntry``),
    /// by id, in one query; those gone are missing.
    func changed(_ db: any SQLConnection, _ entryIDs: [CatalogID]) throws -> [CatalogID: RenderedResource] {
        let rows = try db.query(changeSQL, [JSONArrayParameter.text(entryIDs.lazy.map(\.rawValue), quoted: true)])
        var rendered: [CatalogID: RenderedResource] = [:]
        rendered.reserveCapacity(entryIDs.count)
        while try rows.step() {
            guard let id = CatalogID(String(decoding: rows.text(changeRenderer.columnCount + 1), as: UTF8.self)) else { continue }
            var writer = JSONWriter(capacity: 256)
            try changeRenderer.render(rows, into: &writer)
            rendered[id] = RenderedResource(id: id, version: Int(rows.integer(changeRenderer.columnCount)), json: writer.bytes)
        }
        return rendered
    }

    // MARK: Reads

    /// One page of the entries of `playlistID`, in position order; `fields` masks each
    /// entry's playable item. Fails with `notFound` when the playlist does not exist.
    public func page(
        of playlistID: CatalogID, limit: Int, cursor: String?, fields: FieldMask = .all
    ) throws(StoreError)
        -> (json: [UInt8], nextCursor: String?)
    {
        let after = try cursor.map { text throws(StoreError) in try Self.decodeCursor(text, playlistID: playlistID) }
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                guard let pk = try Self.playlistPK(db, playlistID) else { throw StoreError.notFound }
                var writer = JSONWriter(capacity: 256 + limit * 600)
                let next = try renderPage(
                    db, playlistID: playlistID, pk: pk, after: after ?? -1, limit: limit, fields: fields, epoch: epoch,
                    into: &writer)
                return (writer.bytes, next)
            }
        }
    }

    /// Writes the first page of entries (for `include=entries`), read in `db`'s snapshot
    /// (taken in render-cache `epoch`).
    func firstPage(_ db: any SQLConnection, playlistID: CatalogID, limit: Int, epoch: UInt64, into writer: inout JSONWriter) throws {
        guard let pk = try Self.playlistPK(db, playlistID) else { throw StoreError.notFound }
        _ = try renderPage(db, playlistID: playlistID, pk: pk, after: -1, limit: limit, fields: .all, epoch: epoch, into: &writer)
    }

    /// Writes a page of the entries after the key `after`; returns the next page's cursor.
    private func renderPage(
        _ db: any SQLConnection, playlistID: CatalogID, pk: Int64, after: Int64, limit: Int, fields: FieldMask, epoch: UInt64,
        into writer: inout JSONWriter
    ) throws -> String? {
        try renderPage(
            db.query(pageSQL + " WHERE e.playlist_pk = ? AND e.sort_key > ? ORDER BY e.sort_key LIMIT ?", [pk, after, pk, after, limit + 1]),
            playlistID: playlistID, limit: limit, fields: fields, epoch: epoch, into: &writer)
    }

    @_specialize(exported:false,kind:full,where Rows == SQLiteRows)
    private func renderPage<Rows: SQLRows>(
        _ rows: Rows, playlistID: CatalogID, limit: Int, fields: FieldMask, epoch: UInt64,
        into writer: inout JSONWriter
    ) throws -> String? {
        try rows.writePage(
            limit: limit, into: &writer,
            item: { rows, writer in
                try render(rows, fields: fields, epoch: epoch, into: &writer)
            },
            cursor: { [idColumn, keyColumn] rows in
                ListCursor(
                    fingerprint: Self.fingerprint(playlistID), key: .integer(rows.integer(keyColumn)),
                    id: String(decoding: rows.text(idColumn), as: UTF8.self)
                ).encoded()
            })
    }

    /// The entry `entryID` of `playlistID`, or `nil` when either does not exist.
    public func entry(_ entryID: CatalogID, of playlistID: CatalogID, fields: FieldMask = .all) throws(StoreError) -> RenderedEntry? {
        let epoch = RenderCache.currentEpoch
        return try guarded {
            try database.snapshot { db in
                guard let playlist = try Self.playlist(db, playlistID), try Self.entry(db, entryID, playlistPK: playlist.pk) != nil else { return nil }
                return try renderEntry(db, entryID, version: playlist.version, fields: fields, epoch: epoch)
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
                guard let playlist = try Self.playlist(db, playlistID), let entry = try Self.entry(db, entryID, playlistPK: playlist.pk)
                else { throw StoreError.notFound }
                let next = try renderEntry(
                    db.query(
                        selectSQL + " WHERE e.playlist_pk = ? AND e.sort_key > ? ORDER BY e.sort_key LIMIT 1",
                        [playlist.pk, entry.key]),
                    version: playlist.version, fields: fields, epoch: epoch)
                return next.map(UpNext.entry) ?? .endOfPlaylist
            }
        }
    }

    // MARK: Helpers

    /// Appends an entry from the current row, its item showing `fields`.
    /// Reads pass the render-cache `epoch` of their snapshot; writes pass `nil` and never
    /// touch the cache (what they render might not commit).
    private func render(_ rows: some SQLRows, fields: FieldMask, epoch: UInt64?, into writer: inout JSONWriter) throws {
        try renderer.render(rows, into: &writer, nested: (fields, epoch == nil ? nil : itemCache, epoch ?? 0))
    }

    /// The entry `entryID`, or `nil` when there is none.
    func renderEntry(
        _ db: any SQLConnection, _ entryID: CatalogID, version: Int,
        fields: FieldMask = .all, epoch: UInt64? = nil
    ) throws -> RenderedEntry? {
        try renderEntry(db.query(selectSQL + " WHERE e.id = ?", [entryID.rawValue]), version: version, fields: fields, epoch: epoch)
    }

    @_specialize(exported:false,kind:full,where Rows == SQLiteRows)
    func renderEntry<Rows: SQLRows>(_ rows: Rows, version: Int, fields: FieldMask, epoch: UInt64?) throws -> RenderedEntry? {
        guard try rows.step() else { return nil }
        var writer = JSONWriter(capacity: 700)
        try render(rows, fields: fields, epoch: epoch, into: &writer)
        guard let entryID = CatalogID(String(decoding: rows.text(idColumn), as: UTF8.self)) else {
            throw StoreError.unavailable("The database holds a malformed entry id.")
        }
        return RenderedEntry(entryID: entryID, playlistVersion: version, json: writer.bytes)
    }

    private static func playlistPK(_ db: any SQLConnection, _ id: CatalogID) throws -> Int64? {
        try db.fetchValue("SELECT pk FROM playlists WHERE id = ?", [id.rawValue]).int64
    }

    /// The playlist's row; with `locking`, locked until the write's transaction ends.
    private static func playlist(_ db: any SQLConnection, _ id: CatalogID, locking: Bool = false) throws -> (pk: Int64, version: Int, count: Int)? {
        try db.fetchRow("SELECT pk, version, entry_count FROM playlists WHERE id = ?" + (locking ? db.dialect.forUpdate : ""), [id.rawValue])
            .map { ($0[0].int64 ?? 0, $0[1].int ?? 0, $0[2].int ?? 0) }
    }

    /// The playlist's row, locked, after checking `preconditions` against its version. With
    /// `entry`, that entry's row and key too: a missing playlist or entry is `notFound`
    /// before any precondition is looked at (RFC 9110 §13.2.1).
    static func lock(_ db: any SQLConnection, _ id: CatalogID, _ preconditions: WritePreconditions) throws -> (pk: Int64, version: Int, count: Int) {
        guard let playlist = try playlist(db, id, locking: true) else { throw StoreError.notFound }
        try preconditions.check(current: playlist.version)
        return playlist
    }

    static func lock(
        _ db: any SQLConnection, _ id: CatalogID, entry entryID: CatalogID, _ preconditions: WritePreconditions
    ) throws
        -> (playlist: (pk: Int64, version: Int, count: Int), entry: (pk: Int64, key: Int64))
    {
        guard let playlist = try playlist(db, id, locking: true), let entry = try entry(db, entryID, playlistPK: playlist.pk) else {
            throw StoreError.notFound
        }
        try preconditions.check(current: playlist.version)
        return (playlist, entry)
    }

    /// 409 `quotaExceeded` when `added` more entries in the playlist `playlistPK` would take
    /// its owner's playlists past ``PlaylistOrder/maxEntriesPerUser`` in all.
    static func checkOwnersTotal(_ db: any SQLConnection, playlistPK: Int64, adding added: Int) throws {
        guard added > 0 else { return }
        let total =
            try db.fetchValue(
                """
                SELECT coalesce(sum(o.entry_count), 0) FROM playlists p JOIN playlists o ON o.owner_id = p.owner_id WHERE p.pk = ?
                """, [playlistPK]
            ).int ?? 0
        guard total + added <= PlaylistOrder.maxEntriesPerUser else {
            throw StoreError.quotaExceeded("The owner's playlists would hold more than \(PlaylistOrder.maxEntriesPerUser) entries in all.")
        }
    }

    /// The row and key of the entry `entryID` of the playlist `playlistPK`.
    private static func entry(_ db: any SQLConnection, _ entryID: CatalogID, playlistPK: Int64) throws -> (pk: Int64, key: Int64)? {
        try db.fetchRow("SELECT pk, sort_key FROM playlist_entries WHERE id = ? AND playlist_pk = ?", [entryID.rawValue, playlistPK])
            .map { ($0[0].int64 ?? 0, $0[1].int64 ?? 0) }
    }

    /// Records a change of the playlist's entries: the new count, version + 1, the time.
    /// - Returns: the new version.
    static func touch(_ db: any SQLConnection, _ playlistPK: Int64, count: Int) throws -> Int {
        try db.fetchValue(
            """
            UPDATE playlists SET entry_count = ?, version = version + 1, updated_at = \(db.dialect.greatest)(?, created_at) WHERE pk = ? RETURNING version
            """, [count, Timestamp.milliseconds(Date()), playlistPK]
        ).int ?? 0
    }

    /// What a cursor of the playlist's entries names (cursors by position, from before
    /// keys, name another thing, so they are refused rather than misread).
    private static func fingerprint(_ playlistID: CatalogID) -> String { "playlist_entries by key|\(playlistID)" }

    private static func decodeCursor(_ text: String, playlistID: CatalogID) throws(StoreError) -> Int64 {
        let cursor = try ListCursor(decoding: text, fingerprint: fingerprint(playlistID))
        guard case let .integer(key) = cursor.key, key >= 0, CatalogID(cursor.id) != nil else {
            throw .invalidCursor("The cursor is malformed.")
        }
        return key
    }

    /// Maps database errors to store errors.
    static func mapped<T>(_ completion: @escaping @Sendable (Result<T, any Error>) -> Void) -> @Sendable (Result<T, any Error>) -> Void {
        { result in completion(result.mapError { StoreError.from($0) }) }
    }

    /// As ``mapped(_:)``, for writes that render an entry they just wrote.
    static func found(
        _ completion: @escaping @Sendable (Result<RenderedEntry, any Error>) -> Void
    )
        -> @Sendable (Result<RenderedEntry?, any Error>) -> Void
    {
        { result in completion(result.mapError { StoreError.from($0) }.flatMap { $0.map { .success($0) } ?? .failure(StoreError.notFound) }) }
    }
}
