import CatalogModels

/// A kind of list that lies within one related resource (the comments on an item, the
/// playlists holding it), declared once: the rows it keeps and the resource that must
/// exist for it to exist. The declaration of the resource it lists names it
/// (``ResourceSchema/scopes``); the kinds themselves are declared beside that resource.
public final class ScopeKind: Sendable, Hashable {
    /// Its name, in cursors' fingerprints and cache keys.
    public let name: String
    /// Keeps a row of the listed table (aliased `t`); its one `?` is the scope's id.
    package let filter: String
    /// The table of the resource that must exist for the list to exist (404 otherwise), if any.
    package let parentTable: String?
    /// Whether a scope of this kind keeps rows (`t.role`) up to a role.
    package let boundedByRole: Bool

    package init(name: String, filter: String, parentTable: String? = nil, boundedByRole: Bool = false) {
        self.name = name
        self.filter = filter
        self.parentTable = parentTable
        self.boundedByRole = boundedByRole
    }

    /// A kind is its declared instance: another with the same name and other SQL is
    /// another kind, which no declaration names. (A class: a list request carries one reference.)
    public static func == (lhs: ScopeKind, rhs: ScopeKind) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// One list within one related resource: its kind and the related resource's id.
public struct ListScope: Sendable, Hashable, CustomStringConvertible {
    public let kind: ScopeKind
    /// The related resource's id.
    public let id: CatalogID
    /// The highest role a row may have, for a kind bounded by role.
    public let upTo: Role?

    package init(_ kind: ScopeKind, _ id: CatalogID, upTo: Role? = nil) {
        self.kind = kind
        self.id = id
        self.upTo = upTo
    }

    /// What keeps a row of `t`, its one `?` bound to ``id``. The roles are the model's own
    /// names, never a caller's text.
    package var filter: String {
        guard kind.boundedByRole else { return kind.filter }
        // A bound left out keeps nothing, never everything.
        guard let upTo else { return kind.filter + " AND FALSE" }
        let roles = Role.allCases.filter { $0 <= upTo }.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        return kind.filter + " AND t.role IN (\(roles))"
    }

    /// The resource that must exist for the list to exist (404 otherwise), if any.
    package var parent: (table: String, id: CatalogID)? {
        kind.parentTable.map { ($0, id) }
    }

    public var description: String { kind.name + " " + id.rawValue + (upTo.map { " up to " + $0.rawValue } ?? "") }

    /// The top-level comments on a playable item.
    public static func commentsOn(item: CatalogID) -> ListScope { ListScope(.commentsOn, item) }
    /// The replies to a comment.
    public static func repliesTo(comment: CatalogID) -> ListScope { ListScope(.repliesTo, comment) }
    /// The playlists holding a playable item.
    public static func playlistsContaining(item: CatalogID) -> ListScope { ListScope(.playlistsContaining, item) }
    /// The API keys of a user whose role is at most `upTo`.
    public static func keysOf(user: CatalogID, upTo: Role) -> ListScope { ListScope(.keysOf, user, upTo: upTo) }
}
