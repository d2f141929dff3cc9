import CatalogModels

/// One resource, declared once: its fields (``SchemaField``), table, path and the list
/// features it offers. The store derives its columns, SQL and row renderer from it; the
/// service its body readers, `fields=` and `sort=` names and routes; imports their
/// record members. The declarations themselves are in `Resources/`, one file each.
package final class ResourceSchema: Sendable {
    /// The `type` of its import records, such as `playableItem`.
    package let type: String
    /// Its name in messages, such as `playable item`.
    package let noun: String
    /// The collection's path, such as `/v1/playable-items`; a resource is at `path/{id}`.
    package let path: String
    /// Whether the service serves it with the routes every resource gets (list and create
    /// at ``path``; read, replace, patch and delete at `path/{id}`); `false` when its routes
    /// are its own (comments', posted on an item).
    package let standardRoutes: Bool
    package let table: String
    /// Every member of its documents: `id`, its own fields, `createdAt`, `updatedAt`, `version`.
    package let members: [SchemaField]
    /// The FTS5 table over the fields with a search weight, when lists take `q`.
    package let searchTable: String?
    /// Whether lists take `near`/`radius` and `bbox` (over the columns ``Geo`` reads in the store).
    package let geographic: Bool
    /// Whether renderings are worth caching (resources listed and embedded often).
    package let cachesRenderings: Bool
    /// What `GET …/{id}?include=` may embed, by name.
    package let includes: [String]
    /// List parameters that list within a related resource: name → the scope for its id.
    package let filters: [String: @Sendable (CatalogID) -> ListScope]
    /// The lists within a related resource that list this resource (``ScopeKind``): a
    /// list scoped any other way is refused.
    package let scopes: [ScopeKind]
    /// Who owns each resource and whom it is hidden from, for resources users own.
    package let ownership: Ownership?
    /// The image the resource shows, when it has one (``ImageSlot``): its `image` member
    /// and `PUT`/`DELETE path/{id}/image`.
    package let image: ImageSlot?
    /// Whether documents show what every viewer adds up to (``SchemaField/counts``: likes
    /// and views), which change without a new version: such a document's `ETag` is made
    /// from its content.
    package let counted: Bool
    /// A boolean column that, when true, makes the resource uneditable (409), with why.
    package let frozen: (column: String, detail: String)?
    /// Rules across the fields of an import record (its pointers relative to the record's data).
    package let recordRules: @Sendable (FieldValues) -> [FieldError]

    /// What `POST path` carries: the writable and create-only fields.
    package let creation: DocumentShape
    /// What `PUT`, and a merge patch once applied, carry: the writable fields.
    package let edit: DocumentShape
    /// What the `data` of an import record carries: the stamps and every imported field.
    package let importRecord: DocumentShape

    package init(
        type: String, noun: String, path: String, standardRoutes: Bool = true, table: String, fields: [SchemaField], searchTable: String? = nil,
        geographic: Bool = false,
        cachesRenderings: Bool = false, includes: [String] = [], filters: [String: @Sendable (CatalogID) -> ListScope] = [:], scopes: [ScopeKind] = [],
        ownership: Ownership? = nil, image: ImageSlot? = nil, counted: Bool = false, frozen: (column: String, detail: String)? = nil,
        recordRules: @escaping @Sendable (FieldValues) -> [FieldError] = { _ in [] }
    ) {
        self.type = type
        self.noun = noun
        self.path = path
        self.standardRoutes = standardRoutes
        self.table = table
        let members =
            [SchemaField.stamps[0]] + fields + (image == nil ? [] : [SchemaField.image]) + (counted ? SchemaField.counts : []) + SchemaField.stamps.dropFirst()
        self.members = members
        self.searchTable = searchTable
        self.geographic = geographic
        self.cachesRenderings = cachesRenderings
        self.includes = includes
        self.filters = filters
        self.scopes = scopes
        self.ownership = ownership
        self.image = image
        self.counted = counted
        self.frozen = frozen
        self.recordRules = recordRules
        // Members a document does not accept are refused as read-only, but for what a query
        // computes (a distance): no member of the resource, so unknown.
        func shape(accepting: (SchemaField) -> Bool, requiring: (SchemaField) -> Bool) -> DocumentShape {
            let readOnly = members.filter { field in
                if case .derived = field.storage { return false }
                return !accepting(field)
            }
            return DocumentShape(members, accepting: accepting, requiring: requiring, readOnly: Set(readOnly.map(\.name)))
        }
        creation = shape(accepting: { $0.access != .serverSet }, requiring: \.required)
        edit = shape(accepting: { $0.access == .writable }, requiring: \.required)
        importRecord = shape(accepting: { $0.importRole != .none }, requiring: { $0.required && !$0.nullable })
        searchColumns = members.compactMap { field in field.searchWeight.flatMap { weight in field.column.map { ($0, weight) } } }
    }

    /// The sortable fields, `createdAt` (the default order) first.
    package var sortableFields: [String] {
        ["createdAt"] + members.filter(\.sortable).map(\.name)
    }

    /// The searched columns, in their FTS5 order, with their weights in relevance.
    package let searchColumns: [(column: String, weight: Double)]

    /// The columns an edit writes, in the order of ``edit``'s fields.
    package var editColumns: [(index: Int, column: String)] { columns { $0.access == .writable } }

    /// The columns a creation writes.
    package var creationColumns: [(index: Int, column: String)] { columns { $0.access != .serverSet } }

    /// The columns of members selected by `include`, with their index among ``members``.
    package func columns(_ include: (SchemaField) -> Bool) -> [(index: Int, column: String)] {
        members.indices.compactMap { index in
            guard let column = members[index].column, SchemaField.stampNames.contains(members[index].name) == false, include(members[index])
            else { return nil }
            return (index, column)
        }
    }
}

extension SchemaField {
    /// The members every resource has; only the server sets them, imports carry them.
    static let stamps: [SchemaField] = [
        SchemaField("id", .column("id"), .id(references: nil), access: .serverSet, import: .stamp),
        SchemaField("createdAt", .column("created_at"), .timestamp, access: .serverSet, import: .stamp),
        SchemaField("updatedAt", .column("updated_at"), .timestamp, access: .serverSet, import: .stamp),
        SchemaField("version", .column("version"), .integer(.integer(in: 1...Int(DocumentShape.maxExactInteger))), access: .serverSet, import: .stamp),
    ]

    /// Their names.
    static let stampNames: Set<String> = Set(stamps.map(\.name))

    /// The image of a resource that has one: only its own routes set it; import records carry it.
    static let image = SchemaField("image", .column(ImageSlot.column), .image, access: .serverSet, required: false, nullable: true, import: .data)
}

/// The image a resource shows, declared on it: what it is to the resource (in messages and
/// the contract) and who may set it. Its routes are `PUT` and `DELETE path/{id}/image`
/// (the bytes as the body); documents show it as `image` (``ImageReference``).
package struct ImageSlot: Sendable {
    /// Who may set or remove a resource's image.
    package enum Setters: Sendable {
        /// Whoever may edit the resource (its owner, editors and admins; editors for
        /// resources without owners).
        case editors
        /// The user the resource is, and admins (a user's avatar).
        case itself
    }

    /// What the image is to the resource, such as `artwork`.
    package let name: String
    package let setters: Setters

    package init(_ name: String, setBy setters: Setters = .editors) {
        self.name = name
        self.setters = setters
    }

    /// The column holding the image's JSON object.
    package static let column = "image"
    /// The column computed from it: the image's URL (which resources reference an image).
    package static let urlColumn = "image_url"
}

/// The owner of resources users own (comments, playlists): its only writer besides
/// editors and admins, and, when the resource is hidden, its only reader besides them.
package struct Ownership: Sendable {
    /// The column holding the owner's user id (NULL: no owner, editors' only).
    package let owner: String
    /// The column and value that hide a resource (a private playlist), if it can be hidden.
    package let hiddenWhen: (column: String, value: String)?
    /// The most resources of this kind one user may own, if that is limited.
    package let quota: Int?

    package init(owner: String, hiddenWhen: (column: String, value: String)? = nil, quota: Int? = nil) {
        self.owner = owner
        self.hiddenWhen = hiddenWhen
        self.quota = quota
    }
}
