import CatalogModels
import Foundation
import GRDB

/// The catalog's storage: one SQLite database with every resource.
public final class CatalogStore: Sendable {
    /// Streaming videos.
    public let items: ResourceStore<PlayableItem, PlayableItemInput>
    /// Arcade games.
    public let games: ResourceStore<Game, GameInput>
    /// Places.
    public let locations: ResourceStore<Location, LocationInput>
    /// Playlists (their own fields).
    public let playlists: ResourceStore<Playlist, PlaylistInput>
    /// The entries of playlists.
    public let entries: PlaylistEntryStore
    /// Comments and replies.
    public let comments: CommentStore
    /// The migrations this open applied (empty when the schema was already current).
    public let appliedMigrations: [String]
    /// The database file.
    public let path: String

    let database: CatalogDatabase
    private let lock: DatabaseLock

    /// Opens (creating if needed, with its folder) the database at `path`, checks the
    /// recorded migrations against `migrations` and applies the missing ones.
    /// - Throws: ``MigrationError`` naming the file at fault, or the open error.
    public init(path: String, migrations: [Migration], readers: Int = 4) throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        lock = try DatabaseLock(databasePath: path)
        do {
            database = try CatalogDatabase(path: path, readers: readers)
        } catch {
            lock.release()
            throw error
        }
        do {
            appliedMigrations = try MigrationRunner.migrate(database.pool, migrations: migrations)
        } catch {
            try? database.close()
            lock.release()
            throw error
        }
        self.path = path
        items = ResourceStore(PlayableItemTable.self, database: database)
        games = ResourceStore(GameTable.self, database: database)
        locations = ResourceStore(LocationTable.self, database: database)
        playlists = ResourceStore(PlaylistTable.self, database: database)
        entries = PlaylistEntryStore(database: database, playlists: playlists, items: items)
        comments = CommentStore(database: database)
    }

    // MARK: Embedded lists (`include=…`)

    /// How many items an embedded first page holds at most.
    public static let embeddedPageSize = 50

    /// `comments` in a playable item: its first page of top-level comments, newest first.
    public var itemComments: Embedding {
        Embedding("comments") { [comments] db, id, epoch, writer in
            try comments.resources.renderList(db, ListRequest(limit: Self.embeddedPageSize, order: .field("createdAt", descending: true),
                                                              scope: .commentsOn(item: id)), epoch: epoch, into: &writer)
        }
    }

    /// `playlists` in a playable item: the first page of the playlists holding it.
    public var itemPlaylists: Embedding {
        Embedding("playlists") { [playlists] db, id, epoch, writer in
            try playlists.renderList(db, ListRequest(limit: Self.embeddedPageSize, scope: .playlistsContaining(item: id)), epoch: epoch, into: &writer)
        }
    }

    /// `entries` in a playlist: its first page of entries.
    public var playlistEntries: Embedding {
        Embedding("entries") { [entries] db, id, epoch, writer in
            try entries.firstPage(db, playlistID: id, limit: Self.embeddedPageSize, epoch: epoch, into: &writer)
        }
    }

    /// The SQLite library version, such as `3.40.1`.
    public var sqliteVersion: String {
        (try? database.read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") }) ?? "unknown"
    }

    /// Loads ``DemoCatalog`` into a new, empty catalog, once in the database's life: a
    /// catalog emptied later stays empty.
    /// - Returns: whether it did.
    @discardableResult
    public func seedDemoCatalogIfEmpty() throws -> Bool {
        try database.writes.write(atomic: true) { db -> Bool in
            let marker = "demoCatalogOffered"
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM catalog_metadata WHERE key = ?", arguments: [marker]) == nil else { return false }
            try db.execute(sql: "INSERT INTO catalog_metadata (key, value) VALUES (?, ?)",
                           arguments: [marker, Timestamp.string(from: Date())])
            let existing = try Int.fetchOne(db, sql: """
                SELECT (SELECT count(*) FROM playable_items) + (SELECT count(*) FROM games) + (SELECT count(*) FROM locations)
                     + (SELECT count(*) FROM playlists)
                """) ?? 0
            guard existing == 0 else { return false }
            // Distinct, increasing creation times keep the demo's order stable.
            var clock = Timestamp.milliseconds(Date()) - 60_000
            func insert<Table: ResourceTable>(_ table: Table.Type, _ inputs: [Table.Input]) throws {
                for input in inputs {
                    clock += 1
                    try db.execute(sql: Table.insertSQL, arguments: StatementArguments([CatalogID().rawValue] + Table.values(input) + [clock, clock, 1]))
                }
            }
            try insert(GameTable.self, DemoCatalog.games)
            try insert(LocationTable.self, DemoCatalog.locations)
            try insert(PlayableItemTable.self, DemoCatalog.items)
            try insert(PlaylistTable.self, DemoCatalog.playlists.map(\.input))
            func itemPK(_ title: String) throws -> Int64? {
                try Int64.fetchOne(db, sql: "SELECT pk FROM playable_items WHERE title = ?", arguments: [title])
            }
            for playlist in DemoCatalog.playlists {
                let playlistPK = try Int64.fetchOne(db, sql: "SELECT pk FROM playlists WHERE title = ?", arguments: [playlist.input.title])
                let itemPKs = try playlist.itemTitles.compactMap(itemPK)
                for (position, pk) in itemPKs.enumerated() {
                    clock += 1
                    try db.execute(sql: "INSERT INTO playlist_entries (id, playlist_pk, item_pk, position, created_at) VALUES (?, ?, ?, ?, ?)",
                                   arguments: [CatalogID().rawValue, playlistPK, pk, position, clock])
                }
                try db.execute(sql: "UPDATE playlists SET entry_count = ? WHERE pk = ?", arguments: [itemPKs.count, playlistPK])
            }
            for thread in DemoCatalog.comments {
                guard let itemID = try String.fetchOne(db, sql: "SELECT id FROM playable_items WHERE title = ?", arguments: [thread.itemTitle])
                else { continue }
                func post(_ input: CommentInput, parent: String?) throws -> String {
                    clock += 1
                    let id = CatalogID().rawValue
                    try db.execute(sql: """
                        INSERT INTO comments (id, playable_item_id, parent_id, author, body, created_at, updated_at, version)
                        VALUES (?, ?, ?, ?, ?, ?, ?, 1)
                        """, arguments: [id, itemID, parent, input.author, input.body, clock, clock])
                    return id
                }
                let parent = try post(thread.comment, parent: nil)
                for reply in thread.replies { _ = try post(reply, parent: parent) }
                try db.execute(sql: "UPDATE comments SET reply_count = ? WHERE id = ?", arguments: [thread.replies.count, parent])
            }
            return true
        }
    }

    /// Whether the database answers and every migration is applied.
    public func isReady(migrations: [Migration]) -> Bool {
        (try? database.read { db in try MigrationRunner.isCurrent(db, migrations: migrations) }) ?? false
    }

    /// Finishes queued writes and closes the database.
    public func close() throws {
        defer { lock.release() }
        try database.close()
    }

    /// Writes a consistent copy of the database to `destination` (a new file) with
    /// SQLite's online backup API, from one read snapshot: it holds every write committed
    /// before it began, and writers are never blocked. The copy is checked with
    /// `PRAGMA integrity_check`.
    /// - Returns: the copy's size in bytes.
    public func backup(to destination: String) throws -> Int {
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw StoreError.conflict("\(destination) already exists.")
        }
        try FileManager.default.createDirectory(at: URL(fileURLWithPath: destination).deletingLastPathComponent(), withIntermediateDirectories: true)
        let copy = try DatabaseQueue(path: destination)
        try database.pool.backup(to: copy)
        let integrity = try copy.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        try copy.close()
        guard integrity == "ok" else { throw StoreError.unavailable("The backup failed its integrity check: \(integrity ?? "no answer").") }
        return (try FileManager.default.attributesOfItem(atPath: destination)[.size] as? Int) ?? 0
    }

    /// Replaces the database at `path` with the backup at `source`, after checking the
    /// backup's integrity. Refuses while a server (or anything else) holds the database.
    public static func restore(from source: String, to path: String) throws {
        let lock = try DatabaseLock(databasePath: path)
        defer { lock.release() }
        var configuration = Configuration()
        configuration.readonly = true
        let backup = try DatabaseQueue(path: source, configuration: configuration)
        let integrity = try backup.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        guard integrity == "ok" else { throw StoreError.unavailable("\(source) fails its integrity check: \(integrity ?? "no answer").") }
        try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        let target = try DatabaseQueue(path: path)
        try backup.backup(to: target)
        try target.writeWithoutTransaction { db in _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try target.close()
        try backup.close()
    }
}
