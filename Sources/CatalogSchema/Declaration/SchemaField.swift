import CatalogModels

/// One member of a document, declared once: its API name, where it is kept, the JSON
/// value it holds with its rule (from `CatalogModels`), who may write it, whether it is
/// required or nullable, and what lists and imports do with it. Everything else — body
/// readers, column lists, row renderers, `fields=` and sort names, import members — is
/// derived from these declarations.
package struct SchemaField: Sendable {
    /// The JSON value a field holds and the rule it keeps.
    package enum Kind: Sendable {
        /// A string.
        case text(FieldRule<String>)
        /// An absolute http(s) URL (``Rules/parseWebURL(_:)``), kept as its absolute string.
        case url
        /// A number.
        case number(FieldRule<Double>)
        /// An integer: a JSON number without a fraction, exact in every JSON reader.
        case integer(FieldRule<Int>)
        /// `true` or `false`, kept as 1 or 0.
        case boolean
        /// An RFC 3339 date-time, kept as milliseconds since 1970.
        case timestamp
        /// An id (a lowercase UUID string), of a resource of `references` when it names one.
        case id(references: Reference?)
        /// An array of ids, at most `maxCount`, each of a resource of `references` (bodies only).
        case ids(references: Reference, maxCount: Int)
        /// An array of at most `maxCount` documents of `shape` (import records only).
        case documents(DocumentShape, maxCount: Int)
        /// Another resource's whole document, embedded (rendered only).
        case resource(ResourceSchema)
        /// The image a resource shows (``ImageReference``), kept as its JSON object: set by
        /// the resource's image routes; import records carry it.
        case image
        /// A hosted video (``Video``), kept as its JSON object: set by the server as its
        /// upload and packaging go; import records may carry it and imports leave it out
        /// (the video's bytes are not part of an export).
        case video
    }

    /// Where a field's value comes from when a document is rendered.
    package enum Storage: Sendable, Equatable {
        /// A column of the resource's table.
        case column(String)
        /// A value the query computes under this name (a distance, the owner's id); not a column.
        case derived(String)
        /// Nothing of the table: a member of bodies only, or an embedded document.
        case none
    }

    /// Who may write a field in request bodies.
    package enum Access: Sendable, Equatable {
        /// Creations and edits.
        case writable
        /// Creations only; edits refuse it as read-only.
        case createOnly
        /// Only the server; bodies refuse it as read-only.
        case serverSet
    }

    /// What an import record (`POST /admin/import`) does with a field.
    package enum ImportRole: Sendable, Equatable {
        /// Carried; written when the resource is created, and when it differs (a change).
        case data
        /// Carried; written when the resource is created, left alone afterwards.
        case insertOnly
        /// Carried; written when the resource is created, and must equal the existing value.
        case identity
        /// `id`, `createdAt`, `updatedAt` and `version`: required, applied by the import's rules.
        case stamp
        /// Carried, not a column: the store applies it by the resource's own rules.
        case nested
        /// Carried: a user id of the exporting server. Written when the resource is created
        /// and that user exists here (empty otherwise), left alone afterwards.
        case owner
        /// Carried in exports, left out by imports (what it names does not travel with the record).
        case ignored
        /// Not part of import records.
        case none
    }

    /// The API name: the member's key in JSON documents.
    package let name: String
    package let storage: Storage
    package let kind: Kind
    package let access: Access
    /// Whether bodies (and import records, unless ``nullable``) must carry the field.
    package let required: Bool
    /// Whether the stored value may be null (the JSON then omits the member).
    package let nullable: Bool
    /// What an absent optional member stands for.
    package let defaultValue: FieldValue?
    /// Whether lists sort by it (`sort=name`).
    package let sortable: Bool
    /// Its weight in full-text relevance, when `q` searches it.
    package let searchWeight: Double?
    package let importRole: ImportRole

    package init(
        _ name: String, _ storage: Storage, _ kind: Kind, access: Access = .writable, required: Bool = true, nullable: Bool = false,
        default defaultValue: FieldValue? = nil, sortable: Bool = false, search searchWeight: Double? = nil, import importRole: ImportRole = .data
    ) {
        self.name = name
        self.storage = storage
        self.kind = kind
        self.access = access
        self.required = required
        self.nullable = nullable
        self.defaultValue = defaultValue
        self.sortable = sortable
        self.searchWeight = searchWeight
        self.importRole = importRole
    }

    /// The table column, when the field is one.
    package var column: String? {
        if case let .column(name) = storage { name } else { nil }
    }

    /// The RFC 6901 pointer to the member in its document.
    package var pointer: String { Self.pointer(name) }

    /// The RFC 6901 pointer to a top-level member named `key`.
    package static func pointer(_ key: String) -> String {
        "/" + key.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }
}

extension SchemaField {
    /// A string kept in `column` (the name, unless given); optional when not `required`
    /// (null when absent, unless `default` stands in).
    package static func text(
        _ name: String, column: String? = nil, rule: FieldRule<String>, required: Bool = true, nullable: Bool = false,
        default defaultValue: String? = nil, sortable: Bool = false, search: Double? = nil
    ) -> SchemaField {
        SchemaField(
            name, .column(column ?? name), .text(rule), required: required && defaultValue == nil,
            nullable: nullable || (!required && defaultValue == nil), default: defaultValue.map(FieldValue.text), sortable: sortable,
            search: search)
    }

    /// An absolute http(s) URL kept in `column`; null when absent and not `required`.
    package static func url(_ name: String, column: String, required: Bool = true) -> SchemaField {
        SchemaField(name, .column(column), .url, required: required, nullable: !required)
    }

    /// A number kept in `column` (the name, unless given); null when absent and not `required`.
    package static func number(_ name: String, column: String? = nil, rule: FieldRule<Double>, required: Bool = true) -> SchemaField {
        SchemaField(name, .column(column ?? name), .number(rule), required: required, nullable: !required)
    }

    /// The user who owns a resource, kept in `column`: set by the server from the caller,
    /// absent for resources from before accounts.
    package static func owner(_ name: String, column: String) -> SchemaField {
        SchemaField(name, .column(column), .id(references: nil), access: .serverSet, required: false, nullable: true, import: .owner)
    }

    /// One of `allowed`, kept in `column` (the name, unless given); `default` when absent.
    package static func choice(
        _ name: String, column: String? = nil, rule: FieldRule<String>, access: Access = .writable,
        default defaultValue: String
    ) -> SchemaField {
        SchemaField(name, .column(column ?? name), .text(rule), access: access, required: false, default: .text(defaultValue))
    }

    /// A field only the server sets, shown in every rendering; `import` says whether
    /// import records carry it.
    package static func server(_ name: String, _ storage: Storage, _ kind: Kind, import role: ImportRole = .none) -> SchemaField {
        SchemaField(name, storage, kind, access: .serverSet, required: role != .none, import: role)
    }
}

/// A resource that ids refer to: its table, and its name in messages.
package struct Reference: Sendable, Equatable {
    /// The table whose `id` column holds the ids.
    package let table: String
    /// Its name in messages, such as `playable item`.
    package let noun: String

    /// Playable items.
    package static let playableItems = Reference(table: "playable_items", noun: "playable item")
    /// Comments.
    package static let comments = Reference(table: "comments", noun: "comment")

    /// The violation of an id that names no such resource.
    package var missing: Violation { Violation(.notFound, "No \(noun) has this id.") }
}
