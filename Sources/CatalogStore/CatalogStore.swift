import CatalogModels
import CatalogSchema
import Foundation
import GRDB

/// Where the catalog's data lives: a SQLite file, or a PostgreSQL database.
public enum DatabaseLocation: Sendable, Hashable, CustomStringConvertible {
    /// A SQLite database file (created with its folder when missing).
    case file(String)
    /// A PostgreSQL connection URL (`postgresql://…`), passed to libpq as it is.
    case postgresql(String)

    /// A `postgresql://` or `postgres://` URL, or else a file path.
    public init(_ text: String) {
        self = text.hasPrefix("postgresql://") || text.hasPrefix("postgres://") ? .postgresql(text) : .file(text)
    }

    /// The engine that serves it.
    public var engine: DatabaseEngine {
        switch self {
        case .file: .sqlite
        case .postgresql: .postgresql
        }
    }

    /// The path, or the URL without its password.
    public var description: String {
        switch self {
        case let .file(path): path
        case let .postgresql(url): PostgresDatabase.redacted(url)
        }
    }
}

/// The storage engines the store runs on.
public enum DatabaseEngine: String, Sendable {
    case sqlite
    case postgresql
}

/// The catalog's storage: every resource, in one SQLite file or one PostgreSQL database.
public final class CatalogStore: Sendable {
    /// Every declared resource's store, in the order of ``ResourceSchema/all``: what the
    /// change log renders through, imports write, and the service serves routes from.
    package let resources: [ResourceStore]
    /// Streaming videos.
    public let items: ResourceStore
    /// Arcade games.
    public let games: ResourceStore
    /// Places.
    public let locations: ResourceStore
    /// Playlists (their own fields).
    public let playlists: ResourceStore
    /// The entries of playlists.
    public let entries: PlaylistEntryStore
    /// Comments and replies.
    public let comments: CommentStore
    /// Users and their API keys.
    public let accounts: AccountStore
    /// The first answers to requests sent with an `Idempotency-Key`.
    public let idempotency: IdempotencyStore
    /// The change log behind the feed.
    public let changes: ChangeLog
    /// Each viewer's own change log, behind `GET /v1/me/changes`.
    public let viewerChanges: ViewerChangeLog
    /// The stored images resources show.
    public let images: ImageRecords
    /// Hosted videos: uploads, processing jobs, and the items' `video` members.
    public let videos: VideoRecords
    /// Each viewer's progress in each item.
    public let progress: ProgressStore
    /// Each viewer's favorites.
    public let favorites: FavoriteStore
    /// Each viewer's ratings of items.
    public let ratings: RatingStore
    /// Views of items, and every viewer's likes and views added up.
    public let counts: ViewCounter
    /// Webhook endpoints and their deliveries, as admins manage them.
    public let webhooks: WebhookStore
    /// Webhook messages on their way: events, deliveries, claims and outcomes.
    public let webhookQueue: WebhookQueue
    /// The migrations this open applied (empty when the schema was already current).
    public let appliedMigrations: [String]
    /// Where the data lives.
    public let location: DatabaseLocation

    let database: any SQLDatabase

    /// Opens the SQLite database at `path` (see ``init(_:migrations:readers:loops:)``).
    public convenience init(path: String, migrations: [Migration], readers: Int = 4) throws {
        try self.init(.file(path), migrations: migrations, readers: readers)
    }

    /// Opens the database at `location` (a SQLite file is created, with its folder, when
    /// missing), checks the recorded migrations against `migrations` (those of its
    /// engine: ``Migration/load(from:for:)``) and applies the missing ones. `readers` is
    /// how many reads may run at once on threads that wait; `loops`, how many event loops
    /// send reads without waiting (PostgreSQL: their connections are shared out by it).
    /// - Throws: ``MigrationError`` naming the file at fault, or the open error.
    public init(_ location: DatabaseLocation, migrations: [Migration], readers: Int = 4, loops: Int = 1) throws {
        database =
            switch location {
            case let .file(path): try SQLiteDatabase(path: path, readers: readers)
            case let .postgresql(url): try PostgresDatabase(url: url, readers: readers, loops: loops)
            }
        do {
            appliedMigrations = try database.migrate(migrations)
        } catch {
            try? database.close()
            throw error
        }
        self.location = location
        // Every declared resource gets its store, with what a deletion, an edit or an import
        // changes beyond its row, for those where that is something.
        let relations: [String: Relations] = [
            // Deleting an item removes its entries from every playlist (comments go by cascade).
            ResourceSchema.playableItem.type: Relations(willDelete: { try PlaylistEntryStore.removeItem($0, itemID: $1) }),
            ResourceSchema.playlist.type: Relations(
                importing: ImportRules(applyNested: { db, record, pk, pointer in
                    try PlaylistEntryStore.importEntries(db, record, playlistPK: pk, pointer: pointer)
                })),
            ResourceSchema.comment.type: CommentStore.relations,
        ]
        let database = self.database
        let resources = ResourceSchema.all.map { ResourceStore($0, database: database, relations: relations[$0.type] ?? Relations()) }
        func store(_ schema: ResourceSchema) -> ResourceStore {
            guard let store = resources.first(where: { $0.schema === schema }) else { preconditionFailure("\(schema.type) is not in ResourceSchema.all") }
            return store
        }
        self.resources = resources
        items = store(.playableItem)
        games = store(.game)
        locations = store(.location)
        playlists = store(.playlist)
        entries = PlaylistEntryStore(database: database, playlists: playlists, items: items)
        comments = CommentStore(resources: store(.comment))
        images = ImageRecords(database: database, schemas: ResourceSchema.all + [.user])
        videos = VideoRecords(database: database, items: items)
        accounts = AccountStore(database: database, images: images)
        progress = ProgressStore(database: database, items: items)
        favorites = FavoriteStore(database: database, resources: [.playableItem: items, .game: games, .playlist: playlists])
        ratings = RatingStore(database: database)
        counts = ViewCounter(database: database, items: items)
        idempotency = IdempotencyStore(database: database)
        // The change log renders each declared resource through its store, and entries as entries.
        var renderers: [String: ChangeLog.Renderer] = [ChangeFeedSchema.entryType: { [entries] db, ids in try entries.changed(db, ids) }]
        for store in resources {
            renderers[store.schema.type] = { db, ids in try store.render(db, ids: ids) }
        }
        changes = ChangeLog(database: database, renderers: renderers)
        viewerChanges = ViewerChangeLog(database: database)
        webhooks = WebhookStore(database: database)
        webhookQueue = WebhookQueue(database: database)
    }

    // MARK: Embedded lists (`include=…`)

    /// How many items an embedded first page holds at most.
    public static let embeddedPageSize = 50

    /// `comments` in a playable item: its first page of top-level comments, newest first.
    public var itemComments: Embedding {
        Embedding("comments") { [comments] db, id, _, _, epoch, writer in
            try comments.resources.renderList(
                db,
                ListRequest(
                    limit: Self.embeddedPageSize, order: .field("createdAt", descending: true),
                    scope: .commentsOn(item: id)), epoch: epoch, into: &writer)
        }
    }

    /// `playlists` in a playable item: the first page of the playlists holding it.
    public var itemPlaylists: Embedding {
        Embedding("playlists") { [playlists] db, id, viewer, _, epoch, writer in
            try playlists.renderList(
                db, ListRequest(limit: Self.embeddedPageSize, scope: .playlistsContaining(item: id), viewer: viewer), epoch: epoch,
                into: &writer)
        }
    }

    /// `entries` in a playlist: its first page of entries.
    public var playlistEntries: Embedding {
        Embedding("entries") { [entries] db, id, _, _, epoch, writer in
            try entries.firstPage(db, playlistID: id, limit: Self.embeddedPageSize, epoch: epoch, into: &writer)
        }
    }

    /// `viewerState` in a playable item: the reader's own progress, favorite and rating.
    public var viewerState: Embedding {
        Embedding(ViewerSchema.stateInclude, isReaders: true) { [progress, favorites, ratings] db, id, _, reader, _, writer in
            guard let reader else { throw StoreError.notFound }
            writer.raw("{\"favorite\":")
            writer.raw(try favorites.isFavorite(db, .playableItem, id, user: reader) ? "true" : "false")
            if let found = try progress.progress(db, user: reader, item: id) {
                writer.raw(",\"progress\":")
                writer.raw(try CatalogJSON.makeEncoder().encode(found).map { $0 })
            }
            writer.raw(",\"rating\":")
            writer.string(try ratings.rating(db, user: reader, item: id).rating.rawValue)
            writer.byte(UInt8(ascii: "}"))
        }
    }

    /// What `include=` embeds, by resource type, then name: one for each include a
    /// declaration offers (``ResourceSchema/includes``), which a test checks.
    package var embeddings: [String: [String: Embedding]] {
        [
            items.schema.type: ["comments": itemComments, "playlists": itemPlaylists, ViewerSchema.stateInclude: viewerState],
            playlists.schema.type: ["entries": playlistEntries],
        ]
    }

    /// What `include=name` embeds in resources of `schema`.
    /// - Precondition: `schema` declares the include (at startup: an include declared and
    ///   not implemented stops the server, never silently drops the member).
    package func embedding(_ name: String, in schema: ResourceSchema) -> Embedding {
        guard let embedding = embeddings[schema.type]?[name] else {
            preconditionFailure("\(schema.type) declares include=\(name), which CatalogStore.embeddings does not implement")
        }
        return embedding
    }

    /// The engine and its version, such as `SQLite 3.40.1` or `PostgreSQL 15.18`.
    public var engineVersion: String { database.version }

    /// Whether reads wait on a network (PostgreSQL): they must then never run on an event loop.
    public var readsBlock: Bool { database.dialect.readsBlock }

    /// Whether other servers may share the database (PostgreSQL): what one remembers of
    /// it (credentials) may then be changed by another.
    public var mayBeShared: Bool { database.dialect.mayBeShared }

    /// What became of reads sent from event loops, since the store opened (all zero where
    /// the loops read the database themselves: SQLite).
    public var loopReads: LoopReadCounts {
        guard let database = database as? PostgresDatabase else { return LoopReadCounts() }
        var counts = database.loopReadCounts.snapshot
        counts.unchangedPages = resources.reduce(0) { $0 + ($1.loopPages?.unchanged.load(ordering: .relaxed) ?? 0) }
        return counts
    }

    /// What lets this server remember credentials that other servers may change
    /// (PostgreSQL); `nil` where only this server changes them.
    public var credentials: CredentialWatch? { database.credentials }

    /// Whether the database answers and every migration is applied.
    public func isReady(migrations: [Migration]) -> Bool {
        (try? database.read { db in try MigrationRunner.isCurrent(db, migrations: migrations) }) ?? false
    }

    /// Finishes queued writes and closes the database.
    public func close() throws {
        try database.close()
    }

    /// Writes a consistent copy of the database to `destination` (a new file), on an
    /// engine that copies itself online (``SQLBackups``: SQLite).
    /// - Returns: the copy's size in bytes.
    public func backup(to destination: String, isCancelled: @escaping () -> Bool = { false }) throws -> Int {
        guard let backups = database as? any SQLBackups else {
            throw StoreError.unavailable("Backups are made with pg_dump on PostgreSQL, or with catalog export.")
        }
        return try backups.backup(to: destination, isCancelled: isCancelled)
    }

    /// The bytes a SQLite database takes on disk: its file and its write-ahead log (0 on PostgreSQL).
    public var sizeOnDisk: Int {
        guard case let .file(path) = location else { return 0 }
        return [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
        }
    }

    /// Replaces the SQLite database at `path` with the backup at `source`, after checking
    /// the backup's integrity. Refuses while a server (or anything else) holds the database.
    public static func restore(from source: String, to path: String) throws {
        try SQLiteDatabase.restore(from: source, to: path)
    }
}
