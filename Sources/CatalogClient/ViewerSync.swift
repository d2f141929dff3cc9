import CatalogModels
import Foundation

/// The signed-in viewer's own state (progress, favorites, ratings), kept on the device
/// beside a ``CatalogSync`` copy of the catalog, usable offline, and synced through
/// `/v1/me/changes`.
///
/// ```swift
/// let mine = ViewerSync(client: client, store: myFileStore)
/// await mine.record(ProgressInput(positionSeconds: 312, clientTime: Date(), deviceId: deviceID), for: item)  // offline too
/// try await mine.sync()          // sends what is queued, then takes what changed elsewhere
/// let resumeAt = await mine.progress[item]?.positionSeconds
/// ```
///
/// Changes made on the device apply at once, by the same rule the server applies
/// (``ProgressRules`` for progress), and wait in a queue (saved with the state by a
/// ``ViewerSyncStore``) until ``sync()`` sends them, oldest first. Each queued write is
/// idempotent (a heartbeat sent twice changes nothing the second time, by the rule; a
/// favorite or rating is set to a value), so one whose answer was lost is sent again
/// safely, and it leaves the queue only once the server has answered it. After sending,
/// ``sync()`` reads the viewer's feed and takes the server's state, with what is still
/// queued applied on top: once every device has synced, every device holds what the
/// server holds, whatever order their writes arrived in.
public actor ViewerSync {
    private let client: CatalogClient
    private let store: any ViewerSyncStore
    /// Reads the store once, before anything else (a failed read is tried again, and
    /// nothing is saved over what could not be read).
    private var restoring: Task<Void, any Error>?
    /// The sync under way: one at a time, each after the one before.
    private var syncing: Task<Void, any Error>?

    /// Where the state stands in the viewer's feed; `nil` before the first sync.
    public private(set) var token: String?
    /// The viewer's progress, by item, as the device sees it (its queue applied).
    public private(set) var progress: [CatalogID: PlaybackProgress] = [:]
    /// The viewer's favorites, by kind and id.
    public private(set) var favorites: [FavoriteKey: Favorite] = [:]
    /// The viewer's ratings (likes and dislikes), by item.
    public private(set) var ratings: [CatalogID: Rating] = [:]
    /// The writes made on the device and not yet answered by the server, oldest first.
    public private(set) var queue: [QueuedViewerWrite] = []

    /// What the server said last, before the queue is applied on top.
    private var server = ViewerSyncState()

    /// Creates the viewer's state, synced through `client` (signed in as the viewer) and
    /// saved in `store` (in memory when `nil`).
    public init(client: CatalogClient, store: (any ViewerSyncStore)? = nil) {
        self.client = client
        self.store = store ?? InMemoryViewerSyncStore()
    }

    // MARK: Changes made on the device

    /// Records a player's heartbeat for `item`: applied now by ``ProgressRules`` (with the
    /// device's clock as the receipt time, and the item's running time when known), and
    /// queued for the server.
    public func record(_ heartbeat: ProgressInput, for item: CatalogID, itemDuration: Double? = nil) async throws {
        try await enqueue(QueuedViewerWrite(write: .progress(item: item, heartbeat: heartbeat, itemDuration: itemDuration), queuedAt: Date()))
    }

    /// Makes a resource one of the viewer's favorites (or, with `false`, no longer one).
    public func setFavorite(_ type: FavoriteType, _ id: CatalogID, _ isFavorite: Bool) async throws {
        try await enqueue(QueuedViewerWrite(write: .favorite(type: type, id: id, isFavorite: isFavorite), queuedAt: Date()))
    }

    /// Rates `item` (`none` takes a rating back).
    public func rate(_ item: CatalogID, _ rating: Rating) async throws {
        try await enqueue(QueuedViewerWrite(write: .rating(item: item, rating: rating), queuedAt: Date()))
    }

    /// The most writes the queue holds (a device offline for days): past it, a change
    /// made on the device is refused (``ViewerSyncError/queueFull``) until a sync empties it.
    public static let maxQueued = 10_000

    private func enqueue(_ write: QueuedViewerWrite) async throws {
        try await restoreIfNeeded()
        // A player's steady heartbeats collapse: one that would win over the last one queued
        // for its item, and leaves the same count of plays, takes its place.
        if let last = queue.lastIndex(where: { $0.write.item == write.write.item && $0.write.isProgress }), Self.supersedes(write, queue[last]) {
            queue.remove(at: last)
        }
        guard queue.count < Self.maxQueued else { throw ViewerSyncError.queueFull }
        queue.append(write)
        recompute()
        try await save()
    }

    /// Whether the heartbeat `newer` may replace the queued heartbeat `older` of the same
    /// item: the server would end in the same place with or without `older`. Both from one
    /// device, `newer` no earlier, both giving the same running time, and neither finishing
    /// the item (a finish counts a play, and a heartbeat below it begins the item again).
    static func supersedes(_ newer: QueuedViewerWrite, _ older: QueuedViewerWrite) -> Bool {
        guard case let .progress(item, new, _) = newer.write, case let .progress(olderItem, old, _) = older.write, item == olderItem,
            let duration = new.durationSeconds, duration > 0, old.durationSeconds == duration
        else { return false }
        let finishes = { (heartbeat: ProgressInput) in heartbeat.played == true || heartbeat.positionSeconds >= ProgressRules.playedFraction * duration }
        return new.deviceId == old.deviceId && new.clientTime >= old.clientTime && !finishes(new) && !finishes(old)
    }

    // MARK: Syncing

    /// Sends the queue, oldest first, then reads every change of the viewer's state since
    /// ``token`` (all of it the first time) and takes the server's state, with what is still
    /// queued on top. A write the server refuses for good (the item or resource is gone, or
    /// the write is invalid) leaves the queue; one that fails for now (no connection, 429,
    /// 5xx) stops the sending and stays, and the error is thrown after the feed is read
    /// when it can be (offline, it is thrown at once).
    /// Syncs started while one is under way run after it, one at a time (so a write is
    /// never sent by two at once, nor taken off the queue twice).
    public func sync() async throws {
        let previous = syncing
        let task = Task {
            _ = try? await previous?.value
            try await self.syncOnce()
        }
        syncing = task
        try await task.value
    }

    private func syncOnce() async throws {
        try await restoreIfNeeded()
        var pending: (any Error)?
        while let write = queue.first {
            do {
                try await send(write.write)
            } catch {
                // Refused for good, it can never apply (the feed brings the server's state);
                // a server failing on it again and again gives up the same way; otherwise it
                // waits for the next sync.
                let attempts = write.failures + 1
                guard Self.isFinal(error) || (Self.isServerFailure(error) && attempts >= Self.maxServerFailures) else {
                    if Self.isServerFailure(error), let index = queue.firstIndex(where: { $0.id == write.id }) { queue[index].failures = attempts }
                    pending = error
                    break
                }
            }
            queue.removeAll { $0.id == write.id }
            try await save()
        }
        do {
            try await pull()
        } catch {
            throw pending ?? error
        }
        if let pending { throw pending }
    }

    /// Sends one write. An answer that does not decode was still an answer: the server
    /// applied the write.
    private func send(_ write: QueuedViewerWrite.Write) async throws {
        do {
            try await sendOnce(write)
        } catch CatalogClientError.invalidResponse {
        }
    }

    private func sendOnce(_ write: QueuedViewerWrite.Write) async throws {
        switch write {
        case let .progress(item, heartbeat, _):
            _ = try await client.progress.record(heartbeat, for: item)
        case let .favorite(type, id, isFavorite):
            if isFavorite {
                try await client.viewer.addFavorite(type, id)
            } else {
                do {
                    try await client.viewer.removeFavorite(type, id)
                } catch let error where error.problem?.status == 404 {
                    // Not a favorite: what the write wanted.
                }
            }
        case let .rating(item, rating):
            try await client.viewer.rate(item, rating)
        }
    }

    /// How many times a write may fail on a server error (500) before it is given up, so
    /// one write the server cannot take never holds the queue behind it for good.
    static let maxServerFailures = 5

    /// Whether the server failed on the write itself (a 5xx that is not a passing state).
    private static func isServerFailure(_ error: any Error) -> Bool {
        guard let error = error as? CatalogClientError, !error.isTransient, let status = error.problem?.status else { return false }
        return status >= 500
    }

    /// Whether a refusal is final: the write can never succeed as it is.
    private static func isFinal(_ error: any Error) -> Bool {
        guard let error = error as? CatalogClientError, !error.isTransient, let status = error.problem?.status else { return false }
        return [400, 404, 409, 410, 413, 415, 422].contains(status)
    }

    /// Reads the viewer's feed from ``token`` until it has no more, then recomputes the
    /// device's view: the server's state with the queue on top.
    private func pull() async throws {
        while true {
            let page: ViewerChangePage
            do {
                page = try await client.viewer.changes(since: token, limit: Self.pageSize)
            } catch {
                guard error.isSyncTokenExpired, token != nil else { throw error }
                // Start again from a snapshot of the server's state.
                token = nil
                server = ViewerSyncState()
                continue
            }
            for change in page.changes { server.apply(change) }
            let moved = page.nextToken != token
            token = page.nextToken
            // Kept page by page: a first sync of a large state cut short resumes where it was.
            recompute()
            try await save()
            if !page.hasMore || !moved { break }
        }
    }

    /// The most changes a page of the feed brings (its largest).
    static let pageSize = 1000

    /// The device's view: the server's state with the queue on top.
    private func recompute() {
        var view = server
        for write in queue { Self.apply(write, to: &view) }
        progress = view.progress
        favorites = view.favorites
        ratings = view.ratings
    }

    /// Applies a queued write to a view of the state, as the server will.
    private static func apply(_ write: QueuedViewerWrite, to view: inout ViewerSyncState) {
        switch write.write {
        case let .progress(item, heartbeat, itemDuration):
            view.progress[item] =
                ProgressRules.apply(heartbeat, receivedAt: write.queuedAt, to: view.progress[item], item: item, itemDuration: itemDuration)
                .progress
        case let .favorite(type, id, isFavorite):
            let key = FavoriteKey(type: type, id: id)
            if !isFavorite {
                view.favorites[key] = nil
            } else if view.favorites[key] == nil {
                view.favorites[key] = Favorite(type: type, id: id, favoritedAt: write.queuedAt)
            }
        case let .rating(item, rating):
            view.ratings[item] = rating == .none ? nil : rating
        }
    }

    // MARK: The store

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
        guard let saved = try await store.load() else { return }
        token = saved.token
        server = saved.server
        // Writes made while the store was read come after those it held.
        queue = saved.queue + queue
        recompute()
    }

    private func save() async throws {
        try await store.save(ViewerSyncSnapshot(token: token, server: server, queue: queue))
    }
}

/// A favorite's identity: its kind and id.
public struct FavoriteKey: Codable, Sendable, Hashable {
    /// The kind of resource.
    public var type: FavoriteType
    /// Its id.
    public var id: CatalogID

    /// Creates a key.
    public init(type: FavoriteType, id: CatalogID) {
        self.type = type
        self.id = id
    }
}

/// A write made on the device, waiting for the server.
public struct QueuedViewerWrite: Codable, Sendable, Hashable {
    /// What it does.
    public enum Write: Codable, Sendable, Hashable {
        /// A player's heartbeat (and the item's running time, when the device knew it).
        case progress(item: CatalogID, heartbeat: ProgressInput, itemDuration: Double?)
        /// A favorite set or removed.
        case favorite(type: FavoriteType, id: CatalogID, isFavorite: Bool)
        /// A rating set (`none`: taken back).
        case rating(item: CatalogID, rating: Rating)
    }

    /// What it does.
    public var write: Write
    /// When the device made it (its clock): the receipt time the device applies the rule with.
    public var queuedAt: Date
    /// Its identity in the queue.
    public var id: UUID
    /// How many syncs the server failed it (500).
    public var failures: Int

    /// Creates a queued write.
    public init(write: Write, queuedAt: Date, id: UUID = UUID(), failures: Int = 0) {
        self.write = write
        self.queuedAt = queuedAt
        self.id = id
        self.failures = failures
    }

    private enum CodingKeys: String, CodingKey { case write, queuedAt, id, failures }

    /// Decodes a queued write (one saved before failures were counted has none).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        write = try container.decode(Write.self, forKey: .write)
        queuedAt = try container.decode(Date.self, forKey: .queuedAt)
        id = try container.decode(UUID.self, forKey: .id)
        failures = try container.decodeIfPresent(Int.self, forKey: .failures) ?? 0
    }
}

extension QueuedViewerWrite.Write {
    /// The item a progress or rating write is of (a favorite's resource otherwise).
    var item: CatalogID {
        switch self {
        case let .progress(item, _, _), let .rating(item, _): item
        case let .favorite(_, id, _): id
        }
    }

    /// Whether it is a heartbeat.
    var isProgress: Bool {
        if case .progress = self { true } else { false }
    }
}

/// Why a change on the device was refused.
public enum ViewerSyncError: Error, Sendable, Hashable {
    /// The queue holds ``ViewerSync/maxQueued`` writes: sync before making more.
    case queueFull
}

/// The viewer's state as the server holds it (what its feed said).
public struct ViewerSyncState: Codable, Sendable, Hashable {
    /// Progress by item.
    public var progress: [CatalogID: PlaybackProgress] = [:]
    /// Favorites by kind and id.
    public var favorites: [FavoriteKey: Favorite] = [:]
    /// Ratings by item.
    public var ratings: [CatalogID: Rating] = [:]

    /// An empty state.
    public init() {}

    /// Applies a change of the viewer's feed.
    mutating func apply(_ change: ViewerChange) {
        switch change.kind {
        case .progress:
            progress[change.id] = change.deleted ? nil : change.progress
        case .favorite:
            guard let type = change.favoriteType else { return }
            favorites[FavoriteKey(type: type, id: change.id)] = change.deleted ? nil : change.favorite
        case .rating:
            let rating = change.deleted ? nil : change.rating?.rating
            ratings[change.id] = rating == Rating.none ? nil : rating
        }
    }
}

/// What a ``ViewerSyncStore`` saves: the token, the server's state and the queue.
public struct ViewerSyncSnapshot: Codable, Sendable, Hashable {
    /// Where the state stands in the viewer's feed.
    public var token: String?
    /// The server's state, as its feed said.
    public var server: ViewerSyncState
    /// The writes not yet answered, oldest first.
    public var queue: [QueuedViewerWrite]

    /// Creates a snapshot.
    public init(token: String?, server: ViewerSyncState, queue: [QueuedViewerWrite]) {
        self.token = token
        self.server = server
        self.queue = queue
    }
}

/// Where a ``ViewerSync`` keeps its state and queue between runs (a file, the keychain…).
public protocol ViewerSyncStore: Sendable {
    /// The snapshot saved last; `nil` when there is none.
    func load() async throws -> ViewerSyncSnapshot?
    /// Keeps `snapshot` in place of the one saved before.
    func save(_ snapshot: ViewerSyncSnapshot) async throws
}

/// A ``ViewerSyncStore`` in memory.
public typealias InMemoryViewerSyncStore = InMemorySyncStore<ViewerSyncSnapshot>

extension InMemorySyncStore: ViewerSyncStore where Snapshot == ViewerSyncSnapshot {}
