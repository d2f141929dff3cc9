import CatalogModels
import Foundation

/// A local copy of the catalog kept up to date from the change feed (`GET /v1/changes`):
/// games, playable items, locations, playlists with their entries, and comments, by id.
///
/// ```swift
/// let replica = CatalogSync(client: client, types: [.playableItem, .playlist])
/// try await replica.sync()                                  // everything, or what changed since the last time
/// let items = await replica.playableItems
/// for try await change in replica.changes() { … }           // then live, until the task is cancelled
/// ```
///
/// With a ``CatalogSyncStore`` it starts from the snapshot saved last and saves a new one
/// after every page, so an app that restarts asks only for what changed meanwhile. When
/// the server no longer accepts the token (410 `syncTokenExpired`), everything is dropped
/// and synced again from scratch.
///
/// Beside the catalog, ``viewer`` keeps the signed-in viewer's own progress, favorites and
/// ratings, usable offline (``ViewerSync``): `try await replica.viewer.sync()`.
public actor CatalogSync {
    private let client: CatalogClient
    /// The kinds kept; `nil` for all of them.
    public nonisolated let types: [ChangeType]?
    private let store: any CatalogSyncStore
    /// The signed-in viewer's own state, beside the catalog (synced on its own: it needs a
    /// viewer's credential, the catalog does not).
    public nonisolated let viewer: ViewerSync

    /// Where the copy stands in the feed: the `nextToken` of the last page applied; `nil`
    /// before the first.
    public private(set) var token: String?
    /// The games, by id.
    public private(set) var games: [CatalogID: Game] = [:]
    /// The playable items, by id.
    public private(set) var playableItems: [CatalogID: PlayableItem] = [:]
    /// The locations, by id.
    public private(set) var locations: [CatalogID: Location] = [:]
    /// The playlists' own fields, by id; their entries are in ``entries(of:)``.
    public private(set) var playlists: [CatalogID: Playlist] = [:]
    /// The comments and replies, by id.
    public private(set) var comments: [CatalogID: Comment] = [:]
    /// The playlists' entries, by id, and their ids by playlist (an entry may arrive before
    /// its playlist: the playlist's own change comes after its entries' when it changed last).
    private var playlistEntries: [CatalogID: ChangedEntry] = [:]
    private var entriesByPlaylist: [CatalogID: Set<CatalogID>] = [:]

    /// Increases whenever the copy moves to another token, so a page asked for before is
    /// recognised as stale.
    private var generation = 0
    /// Reads the store once, before the first request.
    private var restoring: Task<Void, any Error>?
    /// The streams of ``changes(wait:)``, each given every change applied.
    private var observers: [UUID: AsyncThrowingStream<Change, any Error>.Continuation] = [:]

    /// Creates a copy that syncs through `client`.
    /// - Parameters:
    ///   - types: the kinds to keep; `nil` or empty for all.
    ///   - store: where snapshots are loaded from and saved to; kept in memory when `nil`.
    ///     A saved snapshot made for other `types` is not used.
    ///   - viewerStore: where ``viewer`` keeps its state and queue; in memory when `nil`.
    public init(
        client: CatalogClient, types: [ChangeType]? = nil, store: (any CatalogSyncStore)? = nil, viewerStore: (any ViewerSyncStore)? = nil
    ) {
        self.client = client
        self.types = types.flatMap { $0.isEmpty ? nil : $0 }
        self.store = store ?? InMemoryCatalogSyncStore()
        viewer = ViewerSync(client: client, store: viewerStore)
    }

    /// The entries of the playlist `playlistID`, in position order (position = index):
    /// sorted by their order keys, as the server orders them. Empty when it is not kept.
    public func entries(of playlistID: CatalogID) -> [ChangeEntry] {
        orderedEntries(of: playlistID).map(\.entry)
    }

    /// The entries of `playlistID` with their order keys, in position order.
    private func orderedEntries(of playlistID: CatalogID) -> [ChangedEntry] {
        (entriesByPlaylist[playlistID] ?? []).compactMap { playlistEntries[$0] }.sorted(by: CatalogSyncSnapshot.inOrder)
    }

    /// Everything kept and the token, as the store saves it (ordered by id; entries by
    /// playlist, in order).
    public var snapshot: CatalogSyncSnapshot {
        CatalogSyncSnapshot(
            token: token, types: types, games: Self.sorted(games), playableItems: Self.sorted(playableItems), locations: Self.sorted(locations),
            playlists: Self.sorted(playlists), playlistEntries: entriesByPlaylist.keys.sorted().flatMap(orderedEntries(of:)),
            comments: Self.sorted(comments))
    }

    /// Asks for every change since ``token`` (everything the first time), page after page
    /// until the server has no more, applying each in order and saving after each page.
    /// When the token has expired, drops everything and syncs again from scratch.
    /// - Returns: the changes applied, in order (changes of kinds this version does not
    ///   know are skipped).
    @discardableResult
    public func sync() async throws -> [Change] {
        try await restoreIfNeeded()
        do {
            return try await pull(wait: nil)
        } catch  where Self.isExpired(error) && token != nil {
            reset()
            return try await pull(wait: nil)
        }
    }

    /// Every change from ``token`` on as it happens, each applied to the copy before it is
    /// yielded (also those another call applies meanwhile), following the feed with
    /// long-polls of `wait` seconds (1…60) until the consuming task is cancelled.
    ///
    /// A lost connection, 429, 502, 503 and 504 are retried after a growing pause (up to
    /// 30 seconds). When the token expires, everything is dropped and the whole catalog
    /// arrives again as upserts: deletions that happened meanwhile are not yielded, so
    /// read the copy again rather than patching a view of your own. Other errors end the
    /// sequence.
    public nonisolated func changes(wait: Int = 30) -> AsyncThrowingStream<Change, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task { await self.follow(wait: wait, continuation: continuation) }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: Following the feed

    /// Long-polls until cancelled, handing each change applied to `continuation`.
    private func follow(wait: Int, continuation: AsyncThrowingStream<Change, any Error>.Continuation) async {
        let id = UUID()
        observers[id] = continuation
        defer { observers[id] = nil }
        var failures = 0
        polling: while !Task.isCancelled {
            do {
                try await restoreIfNeeded()
                _ = try await pull(wait: wait)
                failures = 0
            } catch  where Self.isExpired(error) && token != nil {
                reset()
            } catch  where Self.isTransient(error) && !Task.isCancelled {
                failures += 1
                do {
                    try await Task.sleep(for: Self.retryDelay(after: error, failures: failures))
                } catch {
                    break polling
                }
            } catch {
                if !Task.isCancelled { continuation.finish(throwing: error) }
                break polling
            }
        }
        continuation.finish()
    }

    /// Asks for pages from ``token`` on until one says there are no more, applying each
    /// and saving after it. A page asked for before another call moved the copy on is
    /// dropped and asked for again from the new token.
    private func pull(wait: Int?) async throws -> [Change] {
        var applied: [Change] = []
        while true {
            try Task.checkCancellation()
            let since = token
            let generation = self.generation
            let page = try await client.changes.page(since: since, types: types, wait: wait)
            guard generation == self.generation else { continue }
            var kept: [Change] = []
            for change in page.changes {
                if apply(change) { kept.append(change) }
            }
            token = page.nextToken
            self.generation += 1
            for observer in observers.values {
                for change in kept { observer.yield(change) }
            }
            applied += kept
            try await store.save(snapshot)
            if !page.hasMore { return applied }
        }
    }

    // MARK: Applying changes

    /// Applies one change; `false` when it is of a kind this version does not know, or an
    /// upsert without its resource.
    private func apply(_ change: Change) -> Bool {
        guard let type = change.knownType else { return false }
        if change.deleted {
            remove(type, change.id)
            return true
        }
        switch change.resource {
        case let .game(game)?:
            games[change.id] = game
        case let .playableItem(item)?:
            playableItems[change.id] = item
        case let .location(location)?:
            locations[change.id] = location
        case let .playlist(playlist)?:
            playlists[change.id] = playlist
        case let .comment(comment)?:
            comments[change.id] = comment
        case let .playlistEntry(entry)?:
            // An import may move an entry to another playlist.
            if let previous = playlistEntries.updateValue(entry, forKey: change.id), previous.playlistId != entry.playlistId {
                entriesByPlaylist[previous.playlistId]?.remove(change.id)
            }
            entriesByPlaylist[entry.playlistId, default: []].insert(change.id)
        case nil:
            return false
        }
        return true
    }

    /// Removes a deleted resource and what goes with it: a playlist's entries (which the
    /// server does not report one by one); a playable item's comments and its entries in
    /// every playlist (the server reports those too, but a `types` filter may hide them).
    private func remove(_ type: ChangeType, _ id: CatalogID) {
        switch type {
        case .game:
            games[id] = nil
        case .location:
            locations[id] = nil
        case .comment:
            comments[id] = nil
        case .playlist:
            playlists[id] = nil
            for entryID in entriesByPlaylist.removeValue(forKey: id) ?? [] { playlistEntries[entryID] = nil }
        case .playlistEntry:
            guard let entry = playlistEntries.removeValue(forKey: id) else { return }
            entriesByPlaylist[entry.playlistId]?.remove(id)
        case .playableItem:
            playableItems[id] = nil
            comments = comments.filter { $0.value.playableItemId != id }
            for entry in playlistEntries.values where entry.playableItemId == id {
                remove(.playlistEntry, entry.entryId)
                playlists[entry.playlistId]?.entryCount = entriesByPlaylist[entry.playlistId]?.count ?? 0
            }
        }
    }

    /// Drops everything and the token: the next request starts from scratch.
    private func reset() {
        token = nil
        games = [:]
        playableItems = [:]
        locations = [:]
        playlists = [:]
        comments = [:]
        playlistEntries = [:]
        entriesByPlaylist = [:]
        generation += 1
    }

    // MARK: The store

    /// Loads the store's snapshot, once, before the first request.
    private func restoreIfNeeded() async throws {
        let task: Task<Void, any Error>
        if let restoring {
            task = restoring
        } else {
            task = Task { try await self.restore() }
            restoring = task
        }
        do {
            try await task.value
        } catch {
            restoring = nil
            throw error
        }
    }

    private func restore() async throws {
        guard let snapshot = try await store.load(), Self.sameTypes(snapshot.types, types) else { return }
        token = snapshot.token
        games = Self.byID(snapshot.games)
        playableItems = Self.byID(snapshot.playableItems)
        locations = Self.byID(snapshot.locations)
        playlists = Self.byID(snapshot.playlists)
        playlistEntries = Self.byID(snapshot.playlistEntries)
        entriesByPlaylist = Dictionary(grouping: snapshot.playlistEntries, by: \.playlistId).mapValues { Set($0.map(\.entryId)) }
        comments = Self.byID(snapshot.comments)
        generation += 1
    }

    // MARK: Helpers

    private static func byID<Value: Identifiable>(_ values: [Value]) -> [CatalogID: Value] where Value.ID == CatalogID {
        Dictionary(values.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
    }

    private static func sorted<Value>(_ values: [CatalogID: Value]) -> [Value] {
        values.sorted { $0.key < $1.key }.map(\.value)
    }

    private static func sameTypes(_ lhs: [ChangeType]?, _ rhs: [ChangeType]?) -> Bool {
        lhs.flatMap { $0.isEmpty ? nil : Set($0) } == rhs.flatMap { $0.isEmpty ? nil : Set($0) }
    }

    private static func isExpired(_ error: any Error) -> Bool {
        (error as? CatalogClientError)?.isSyncTokenExpired ?? false
    }

    private static func isTransient(_ error: any Error) -> Bool {
        (error as? CatalogClientError)?.isTransient ?? false
    }

    /// 1, 2, 4… up to 30 seconds (at least what a 429's `Retry-After` says), ±20%.
    private static func retryDelay(after error: any Error, failures: Int) -> Duration {
        var seconds = min(30, Double(1 << min(max(failures - 1, 0), 5)))
        if case let .rateLimited(_, retryAfter?)? = error as? CatalogClientError { seconds = max(seconds, Double(retryAfter)) }
        return .milliseconds(Int(seconds * Double.random(in: 0.8...1.2) * 1000))
    }
}

/// Everything a ``CatalogSync`` keeps, with its token: what a ``CatalogSyncStore`` saves.
/// Encode it with `CatalogJSON.makeEncoder()` to write it to a file.
///
/// A snapshot saved by an earlier version (each playlist beside its entries, without
/// order keys) still decodes, without its entries and its token: the next sync starts
/// from scratch, and so gets every entry with its order key.
public struct CatalogSyncSnapshot: Codable, Sendable, Hashable {
    /// The `nextToken` of the last page applied; `nil` before the first.
    public var token: String?
    /// The kinds kept; `nil` for all.
    public var types: [ChangeType]?
    /// The games.
    public var games: [Game]
    /// The playable items.
    public var playableItems: [PlayableItem]
    /// The locations.
    public var locations: [Location]
    /// The playlists' own fields.
    public var playlists: [Playlist]
    /// The playlists' entries (each names its playlist), in order within each playlist.
    public var playlistEntries: [ChangedEntry]
    /// The comments and replies.
    public var comments: [Comment]

    /// Creates a snapshot.
    public init(
        token: String? = nil, types: [ChangeType]? = nil, games: [Game] = [], playableItems: [PlayableItem] = [], locations: [Location] = [],
        playlists: [Playlist] = [], playlistEntries: [ChangedEntry] = [], comments: [Comment] = []
    ) {
        self.token = token
        self.types = types
        self.games = games
        self.playableItems = playableItems
        self.locations = locations
        self.playlists = playlists
        self.playlistEntries = playlistEntries
        self.comments = comments
    }

    /// Whether `lhs` comes before `rhs` in their playlist: by order key, then by id.
    static func inOrder(_ lhs: ChangedEntry, _ rhs: ChangedEntry) -> Bool {
        (lhs.orderKey, lhs.entryId.rawValue) < (rhs.orderKey, rhs.entryId.rawValue)
    }

    private enum CodingKeys: String, CodingKey { case token, types, games, playableItems, locations, playlists, playlistEntries, comments }

    /// An earlier version's playlist: the playlist beside its entries (which are dropped).
    private struct EarlierPlaylist: Decodable {
        var playlist: Playlist
    }

    /// Decodes a snapshot, also one an earlier version saved (without its entries).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        token = try container.decodeIfPresent(String.self, forKey: .token)
        types = try container.decodeIfPresent([ChangeType].self, forKey: .types)
        games = try container.decode([Game].self, forKey: .games)
        playableItems = try container.decode([PlayableItem].self, forKey: .playableItems)
        locations = try container.decode([Location].self, forKey: .locations)
        if let playlistEntries = try container.decodeIfPresent([ChangedEntry].self, forKey: .playlistEntries) {
            playlists = try container.decode([Playlist].self, forKey: .playlists)
            self.playlistEntries = playlistEntries
        } else {
            playlists = try container.decode([EarlierPlaylist].self, forKey: .playlists).map(\.playlist)
            playlistEntries = []
            token = nil
        }
        comments = try container.decode([Comment].self, forKey: .comments)
    }
}

/// Where a ``CatalogSync`` keeps its snapshot between runs (a file, a database…).
public protocol CatalogSyncStore: Sendable {
    /// The snapshot saved last; `nil` when there is none.
    func load() async throws -> CatalogSyncSnapshot?
    /// Keeps `snapshot` in place of the one saved before.
    func save(_ snapshot: CatalogSyncSnapshot) async throws
}

/// A snapshot kept in memory: what a ``CatalogSync`` (``InMemoryCatalogSyncStore``) or a
/// ``ViewerSync`` (``InMemoryViewerSyncStore``) uses when given no store.
public actor InMemorySyncStore<Snapshot: Sendable> {
    /// The snapshot saved last.
    public private(set) var snapshot: Snapshot?

    /// Creates a store holding `snapshot`.
    public init(snapshot: Snapshot? = nil) {
        self.snapshot = snapshot
    }

    /// The snapshot saved last.
    public func load() -> Snapshot? {
        snapshot
    }

    /// Keeps `snapshot`.
    public func save(_ snapshot: Snapshot) {
        self.snapshot = snapshot
    }
}

/// A ``CatalogSyncStore`` in memory.
public typealias InMemoryCatalogSyncStore = InMemorySyncStore<CatalogSyncSnapshot>

extension InMemorySyncStore: CatalogSyncStore where Snapshot == CatalogSyncSnapshot {}
