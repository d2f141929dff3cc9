import CatalogModels
import CatalogSchema
import Foundation

/// Which changes a reader of the feed wants.
public struct ChangeFilter: Sendable, Hashable {
    /// The types the feed carries, in the order an import needs them (a playlist's
    /// entries after playlists).
    public static let allTypes = ResourceSchema.all.flatMap { schema in
        schema.type == ResourceSchema.playlist.type ? [schema.type, ChangeFeedSchema.entryType] : [schema.type]
    }

    /// The types wanted (sorted, no repeats; `playlist` and `playlistEntry` bring each
    /// other along: entries without their playlist's deletions would outlive it); `nil`:
    /// every type.
    public let types: [String]?
    /// Only the changes of this playable item and of its comments.
    public let playableItemID: CatalogID?
    /// The viewer whose own state a viewer's log (``ViewerChangeLog``) reads; `nil` for the catalog's.
    public let user: CatalogID?

    /// A filter; `types` must be names from ``allTypes``.
    public init(types: [String]? = nil, playableItemID: CatalogID? = nil, user: CatalogID? = nil) {
        let playlists: Set = [ResourceSchema.playlist.type, ChangeFeedSchema.entryType]
        self.types = types.map { types in
            Array(Set(types).union(playlists.isDisjoint(with: types) ? [] : playlists)).sorted()
        }
        self.playableItemID = playableItemID
        self.user = user
    }
}

/// One change of the log as read: the resource's latest change, with who may see it.
public struct ChangeRecord: Sendable {
    /// Its place in the log.
    public let seq: Int64
    /// `game`, `playableItem`, `location`, `playlist`, `playlistEntry` or `comment`.
    public let type: String
    public let id: String
    public let version: Int
    /// Whether the resource is gone.
    public let deleted: Bool
    /// For playlists and their entries: the owner, whether it is private now, and whether
    /// it was ever public (an entry never is: its playlist's change says when others lose it).
    let ownerID: String?
    let hidden: Bool
    let shown: Bool
    /// The change as its JSON object: an upsert with the resource, or the deletion.
    public let json: [UInt8]

    /// What a reader sees of a change.
    public enum Sight: Sendable {
        /// The change as it is.
        case whole
        /// A deletion: the resource was shown to others once and is hidden now.
        case deletion
        /// Nothing: the reader never could see the resource.
        case nothing
    }

    /// What `viewer` sees of this change: a private playlist is seen whole only by its
    /// owner (and by those who see everything); by others, as a deletion when it was public once.
    public func sight(for viewer: Viewer) -> Sight {
        guard hidden, case let .user(user) = viewer else { return .whole }
        // A private playlist without an owner (its owner's account was deleted, or an
        // import made it so) is the owner's of nobody: anonymous callers are no owner.
        if let user, user.rawValue == ownerID { return .whole }
        return shown ? .deletion : .nothing
    }

    /// The change as a deletion, for those who no longer see the resource (its version
    /// one past the last they could have seen).
    public var deletionJSON: [UInt8] {
        deleted ? json : Self.deletion(type: type, id: id, version: version + 1)
    }

    /// `{"deleted":true,"id":…,"type":…,"version":…}` (keys in the encoder's sorted order).
    static func deletion(type: String, id: String, version: Int) -> [UInt8] {
        var writer = JSONWriter(capacity: 160)
        writer.raw("{\"deleted\":true,\"id\":")
        writer.string(id)
        writer.raw(",\"type\":")
        writer.string(type)
        writer.raw(",\"version\":")
        writer.integer(Int64(version))
        writer.raw("}")
        return writer.bytes
    }
}

/// A run of changes read from one snapshot of the log.
public struct ChangeBatch: Sendable {
    /// Where it starts: the changes come after this `seq`.
    public let after: Int64
    /// The changes, in log order.
    public let records: [ChangeRecord]
    /// Whether the log held no more (matching) changes than these when read.
    public let complete: Bool
    /// The log's highest `seq` when read: where a reader who has seen every change continues.
    public let highWater: Int64

    /// What `viewer` gets of this batch: at most `limit` changes and about `maxBytes` of
    /// JSON (at least one change), where it continues, and whether more follow at once.
    public func page(for viewer: Viewer, limit: Int, maxBytes: Int) -> (changes: [ChangeRecord.Delivery], next: Int64, hasMore: Bool) {
        var delivered: [ChangeRecord.Delivery] = []
        var bytes = 0
        var last = after
        for record in records {
            if delivered.count == limit || (bytes >= maxBytes && !delivered.isEmpty) { return (delivered, last, true) }
            last = record.seq
            let json: [UInt8]
            switch record.sight(for: viewer) {
            case .nothing: continue
            case .whole: json = record.json
            case .deletion: json = record.deletionJSON
            }
            bytes += json.count
            delivered.append(ChangeRecord.Delivery(seq: record.seq, json: json))
        }
        return complete ? (delivered, max(last, highWater), false) : (delivered, last, true)
    }
}

extension ChangeRecord {
    /// A change as one reader gets it.
    public struct Delivery: Sendable {
        public let seq: Int64
        public let json: [UInt8]
    }
}

/// What a feed token says: where in which catalog's log a reader is, and when that was.
/// Opaque to clients: `c1.` and base64url of `catalog:seq:issued`.
public struct ChangeToken: Sendable, Equatable {
    /// The catalog's id (`catalog_id` in catalog_metadata).
    public let catalog: String
    public let seq: Int64
    /// When the token was made, in milliseconds since 1970.
    public let issued: Int64

    public init(catalog: String, seq: Int64, issued: Int64) {
        self.catalog = catalog
        self.seq = seq
        self.issued = issued
    }

    /// The token's text.
    public var encoded: String {
        var bytes: [UInt8] = []
        Self.append(catalog: Array(catalog.utf8), seq: seq, issued: issued, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the text of the token of `catalog` (its UTF-8), `seq` and `issued` to
    /// `bytes`, as ``encoded`` spells it, without making a `String` (an event stream
    /// writes one per change).
    public static func append(catalog: [UInt8], seq: Int64, issued: Int64, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: "c1.".utf8)
        // `catalog:seq:issued`: at most 64 + 2 + 2 × 19 bytes.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: catalog.count + 42) { plain in
            var count = 0
            func put(_ byte: UInt8) {
                plain[count] = byte
                count += 1
            }
            func put(_ number: Int64) {
                let start = count
                var rest = UInt64(max(number, 0))
                repeat {
                    put(UInt8(ascii: "0") + UInt8(rest % 10))
                    rest /= 10
                } while rest > 0
                var low = start, high = count - 1
                while low < high {
                    plain.swapAt(low, high)
                    low += 1
                    high -= 1
                }
            }
            for byte in catalog { put(byte) }
            put(UInt8(ascii: ":"))
            put(seq)
            put(UInt8(ascii: ":"))
            put(issued)
            Base64URL.append(UnsafeBufferPointer(rebasing: plain[..<count]), to: &bytes)
        }
    }

    /// Reads a token; `nil` when `text` is not one this server made (at most 200 bytes).
    public init?(_ text: String) {
        guard text.utf8.count <= 200, text.hasPrefix("c1.") else { return nil }
        guard let plain = Base64URL.decode(String(text.dropFirst(3))), let decoded = String(validating: plain, as: UTF8.self) else { return nil }
        let parts = decoded.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, (1...64).contains(parts[0].utf8.count),
            parts[0].utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
            let seq = Int64(parts[1]), seq >= 0, let issued = Int64(parts[2]), issued >= 0
        else { return nil }
        self.init(catalog: String(parts[0]), seq: seq, issued: issued)
    }
}

/// The change log (`changes`, written by triggers; see `Migrations/0006_change_log.sql`):
/// reads of it for the feed, checks of tokens, and the purge of old deletions.
public struct ChangeLog: ChangeSource {
    let database: any SQLDatabase
    /// How each type's resources are rendered: all of a read's at once, by id (a query
    /// per type, not per change: a page of a thousand changes is a few round trips).
    /// Renders the resources of one type by id, as a read's snapshot holds them.
    typealias Renderer = @Sendable (any SQLConnection, [CatalogID]) throws -> [CatalogID: RenderedResource]
    /// By type: every type the log holds has one (a test checks), or its changes could not be shown.
    let renderers: [String: Renderer]

    /// Fired after commits (which may have logged changes).
    public var commits: CommitSignal { database.commits }

    /// The most changes one read returns.
    public static let maxReadLimit = 1000

    /// This catalog's id, which every token carries.
    public func catalogID() throws(StoreError) -> String {
        try guarded {
            guard let id = try database.read({ db in try db.fetchValue("SELECT value FROM catalog_metadata WHERE key = 'catalog_id'") }).string else {
                throw StoreError.unavailable("The change log has no catalog id.")
            }
            return id
        }
    }

    /// Checks that the feed can continue from `token`: made by this catalog, within the
    /// `retention`, and not ahead of the log (``read(after:filter:viewer:limit:maxBytes:)``
    /// checks purged deletions, in the snapshot it reads).
    /// - Throws: ``StoreError/syncTokenExpired(_:)`` when it cannot.
    public func check(_ token: ChangeToken, catalog: String, retention: Duration, now: Int64, filter: ChangeFilter) throws(StoreError) {
        guard token.catalog == catalog else { throw .syncTokenExpired("The token is from another catalog; sync again from the start.") }
        guard token.issued <= now + 60_000 else { throw .syncTokenExpired("The token was not made by this server; sync again from the start.") }
        guard now - token.issued <= retention.components.seconds * 1000 else {
            throw .syncTokenExpired("The token is older than the change log's retention; sync again from the start.")
        }
        let (purged, top) = try guarded {
            try database.read { db in
                let row = try db.fetchRow(
                    """
                    SELECT (SELECT value FROM catalog_metadata WHERE key = 'changes_purged_through'), (SELECT coalesce(max(seq), 0) FROM changes)
                    """)
                return (Int64(row?[0].string ?? "") ?? 0, row?[1].int64 ?? 0)
            }
        }
        guard token.seq <= max(top, purged) else { throw .syncTokenExpired("The token is ahead of this catalog's changes; sync again from the start.") }
    }

    /// The log's highest `seq`.
    public func highWater() throws(StoreError) -> Int64 {
        try guarded { try database.read { db in try db.fetchValue("SELECT coalesce(max(seq), 0) FROM changes").int64 ?? 0 } }
    }

    /// The changes after `seq` that match `filter`, at most `limit` (≤ ``maxReadLimit``)
    /// and about `maxBytes` of JSON, read from one snapshot. With a `viewer`, only what it
    /// may see is read; without, everything (to share among readers: see ``ChangeBatch/page(for:limit:maxBytes:)``).
    /// - Throws: ``StoreError/syncTokenExpired(_:)`` when deletions after `seq` were purged.
    public func read(after seq: Int64, filter: ChangeFilter, viewer: Viewer?, limit: Int, maxBytes: Int) throws(StoreError) -> ChangeBatch {
        let limit = max(1, min(limit, Self.maxReadLimit))
        let (sql, arguments) = pageQuery(after: seq, filter: filter, viewer: viewer, limit: limit)
        return try guarded {
            try database.snapshot { db in
                // A reader after the start must not have missed purged deletions: checked in
                // the snapshot it reads, so a purge committing meanwhile cannot slip between.
                if seq > 0, let purged = Int64(try db.fetchValue("SELECT value FROM catalog_metadata WHERE key = 'changes_purged_through'").string ?? ""),
                    seq < purged
                {
                    throw StoreError.syncTokenExpired("Deletions after this token were purged; sync again from the start.")
                }
                let rows = try db.fetchRows(sql, arguments)
                var records: [ChangeRecord] = []
                records.reserveCapacity(min(rows.count, limit))
                var bytes = 0
                var complete = rows.count <= limit
                var wanted: [String: [CatalogID]] = [:]
                for row in rows.prefix(limit) where !row[4].bool {
                    if let type = row[1].string, let id = row[2].string.flatMap(CatalogID.init) { wanted[type, default: []].append(id) }
                }
                // By type, then id: an import may give resources of two types one id.
                var rendered: [String: [CatalogID: RenderedResource]] = [:]
                for (type, ids) in wanted {
                    guard let render = renderers[type] else { continue }
                    rendered[type] = try render(db, ids)
                }
                for row in rows.prefix(limit) {
                    if bytes >= maxBytes && !records.isEmpty {
                        complete = false
                        break
                    }
                    guard let record = record(row, rendered: rendered) else { continue }
                    bytes += record.json.count
                    records.append(record)
                }
                let top = complete ? try db.fetchValue("SELECT coalesce(max(seq), 0) FROM changes").int64 ?? 0 : records.last?.seq ?? seq
                return ChangeBatch(after: seq, records: records, complete: complete, highWater: top)
            }
        }
    }

    /// The statement of ``read(after:filter:viewer:limit:maxBytes:)``: the changes after `seq`
    /// that match `filter` (and `viewer` may see), in order, `limit + 1` of them at most
    /// (`limit` at most ``maxReadLimit``).
    func pageQuery(after seq: Int64, filter: ChangeFilter, viewer: Viewer?, limit: Int) -> (String, SQLArguments) {
        let limit = max(1, min(limit, Self.maxReadLimit))
        var conditions = "seq > ?"
        var conditionArguments: SQLArguments = [seq]
        if let types = filter.types {
            conditions += " AND type IN (" + types.map { _ in "?" }.joined(separator: ", ") + ")"
            for type in types { conditionArguments.append(type) }
        }
        if case let .user(user) = viewer {
            // What the viewer can never see is not read at all.
            conditions += " AND (hidden = 0 OR shown = 1 OR owner_id = ?)"
            conditionArguments.append(user?.rawValue ?? "")
        }
        let select = "SELECT seq, type, id, version, deleted, owner_id, hidden, shown FROM changes WHERE "
        var sql: String, arguments: SQLArguments
        if let item = filter.playableItemID {
            // The item's comments (and its own row, if logged before 0008) by subject, in
            // order of changes_by_subject (not entries: their subject is a playlist's id);
            // its own row by (type, id); merged in order.
            sql =
                select + "subject = ? AND type <> ? AND " + conditions
                + " UNION ALL " + select + "type = ? AND id = ? AND subject IS NULL AND " + conditions
            arguments =
                [item.rawValue, ChangeFeedSchema.entryType] + conditionArguments + [ResourceSchema.playableItem.type, item.rawValue]
                + conditionArguments
        } else {
            sql = select + conditions
            arguments = conditionArguments
        }
        // The whole log in order, planned once (the types it holds may be rare: their
        // plan depends on which; an item's two index lookups were planned once already).
        sql =
            filter.types == nil && filter.playableItemID == nil
            ? database.dialect.limited(sql, order: "ORDER BY seq", atMost: Self.maxReadLimit + 1) : sql + " ORDER BY seq LIMIT ?"
        arguments.append(limit + 1)
        return (sql, arguments)
    }

    /// The record of a row of `changes`, its resource as the read's snapshot held it
    /// (`rendered`, by type and id); `nil` when it is gone.
    private func record(_ row: SQLRow, rendered: [String: [CatalogID: RenderedResource]]) -> ChangeRecord? {
        guard let seq = row[0].int64, let type = row[1].string, let id = row[2].string, let version = row[3].int else { return nil }
        let deleted = row[4].bool
        var json: [UInt8] = []
        var currentVersion = version
        if deleted {
            json = ChangeRecord.deletion(type: type, id: id, version: version)
        } else {
            guard let catalogID = CatalogID(id), let resource = rendered[type]?[catalogID] else { return nil }
            currentVersion = resource.version
            json = Self.upsert(type: type, id: id, resource: resource)
        }
        return ChangeRecord(
            seq: seq, type: type, id: id, version: currentVersion, deleted: deleted, ownerID: row[5].string,
            hidden: row[6].bool, shown: row[7].bool, json: json)
    }

    /// `{"id":…,"resource":…,"type":…,"version":…}`: the upsert of `resource` (its own version).
    static func upsert(type: String, id: String, resource: RenderedResource) -> [UInt8] {
        var writer = JSONWriter(capacity: resource.json.count + 128)
        writer.raw("{\"id\":")
        writer.string(id)
        writer.raw(",\"resource\":")
        writer.raw(resource.json)
        writer.raw(",\"type\":")
        writer.string(type)
        writer.raw(",\"version\":")
        writer.integer(Int64(resource.version))
        writer.raw("}")
        return writer.bytes
    }

    /// Deletes the deletions recorded before `cutoff` (milliseconds since 1970), noting
    /// the highest `seq` purged: a token before it has missed them. Returns how many went.
    public func purge(before cutoff: Int64, completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        Self.purge(database, table: "changes", marker: "changes_purged_through", before: cutoff, completion: completion)
    }

    /// Deletes the rows of a change log `table` that record deletions before `cutoff`,
    /// noting the highest `seq` purged in catalog_metadata under `marker`.
    static func purge(
        _ database: any SQLDatabase, table: String, marker: String, before cutoff: Int64, completion: @escaping @Sendable (Result<Int, any Error>) -> Void
    ) {
        database.submit(
            atomic: true, heavy: true,
            { db -> Int in
                guard let top = try db.fetchValue("SELECT max(seq) FROM \(table) WHERE deleted = 1 AND changed_at < ?", [cutoff]).int64 else { return 0 }
                let count = try db.execute("DELETE FROM \(table) WHERE deleted = 1 AND changed_at < ?", [cutoff])
                let purged = Int64(try db.fetchValue("SELECT value FROM catalog_metadata WHERE key = ?", [marker]).string ?? "") ?? 0
                if top > purged {
                    try db.execute("UPDATE catalog_metadata SET value = ? WHERE key = ?", [String(top), marker])
                }
                return count
            }, completion: { completion($0.mapError { StoreError.from($0) }) })
    }
}
