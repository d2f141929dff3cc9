import CatalogModels
import CatalogSchema
import Foundation

/// One record of an import: the declaration of its resource and the values its
/// ``ResourceSchema/importRecord`` reader took from the record's `data`.
package struct ImportRecord: Sendable {
    package let schema: ResourceSchema
    package let values: FieldValues

    package init(schema: ResourceSchema, values: FieldValues) {
        self.schema = schema
        self.values = values
    }
}

/// What an import of one resource does beyond the generic upsert of its row.
struct ImportRules: Sendable {
    /// Checks a new row's references within the resource itself, before it is inserted
    /// (references to other resources are checked for existence by the upsert).
    var checkNew: (@Sendable (any SQLConnection, FieldValues, _ pointer: String) throws -> Void)?
    /// Applies the record's nested members once its row is written (`pk`); returns
    /// whether that changed anything.
    var applyNested: (@Sendable (any SQLConnection, FieldValues, _ pk: Int64, _ pointer: String) throws -> Bool)?
    /// Runs once after every record, with the records of this resource.
    var finish: (@Sendable (any SQLConnection, [FieldValues]) throws -> Void)?
}

extension CatalogStore {
    /// Applies `records` (an export, or part of one) in one transaction: each resource is
    /// created with its id, times and version when absent, changed when its content
    /// differs (its version then moves past both its current and the imported one), and
    /// left alone when equal, so importing the same records twice changes nothing.
    /// Fails with `invalid` naming `/records/N/data/…` when a record refers to a resource
    /// that neither exists nor comes earlier, and `conflict` when a record would move an
    /// existing resource (a comment to another thread, an entry to another playlist).
    package func importRecords(
        _ records: [ImportRecord], options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<ImportSummary, any Error>) -> Void
    ) {
        let relations = Dictionary(uniqueKeysWithValues: resources.map { ($0.schema.type, $0.relations) })
        let caches = Dictionary(uniqueKeysWithValues: resources.compactMap { store in store.cache.map { (store.schema.type, $0) } })
        database.submit(
            options, atomic: true, heavy: true,
            { db in
                try ImageRecords.touchShown(db, records)
                var summary = ImportSummary()
                for (index, record) in records.enumerated() {
                    let rules = relations[record.schema.type]?.importing ?? ImportRules()
                    switch try Self.upsert(db, record, rules: rules, pointer: "/records/\(index)/data") {
                    case .created: summary.created += 1
                    case .updated: summary.updated += 1
                    case .unchanged: summary.unchanged += 1
                    }
                }
                for (type, relation) in relations.sorted(by: { $0.key < $1.key }) {
                    let own = records.filter { $0.schema.type == type }.map(\.values)
                    if !own.isEmpty { try relation.importing.finish?(db, own) }
                }
                return summary
            },
            completion: { result in
                // Imported resources may come back at a version the render cache saw with other content.
                if case .success = result {
                    for record in records {
                        if let cache = caches[record.schema.type], let id = record.values[column: "id"]?.text { cache.invalidate(id: id) }
                    }
                }
                completion(result.mapError { StoreError.from($0) })
            })
    }

    private enum ImportOutcome { case created, updated, unchanged }

    /// Creates, changes or keeps one resource's row, then applies its nested members.
    private static func upsert(_ db: any SQLConnection, _ record: ImportRecord, rules: ImportRules, pointer: String) throws -> ImportOutcome {
        let schema = record.schema, values = record.values
        let id = values[column: "id"]?.text ?? ""
        let data = schema.columns { $0.importRole == .data }
        let identity = schema.columns { $0.importRole == .identity }
        let owners = schema.columns { $0.importRole == .owner }
        let inserted = data + identity + schema.columns { $0.importRole == .insertOnly } + owners
        // An owner is a user of the exporting server: kept when that user exists here.
        var known: [Int: SQLValue] = [:]
        for owner in owners {
            guard let user = values.values[owner.index]?.text, try db.exists("SELECT 1 FROM users WHERE id = ?", [user]) else {
                known[owner.index] = .null
                continue
            }
            known[owner.index] = .text(user)
        }
        func value(_ member: Int) -> SQLValue { known[member] ?? values.values[member]?.sqlValue ?? .null }
        let stamp = { (column: String) in values[column: column]?.sqlValue ?? .null }
        let greatest = db.dialect.greatest
        var outcome: ImportOutcome
        let selected = (data + identity).map(\.column)
        // Locked: the comparison decides the write.
        let select = "SELECT \((selected.isEmpty ? ["1"] : selected).joined(separator: ", ")) FROM \(schema.table) WHERE id = ?" + db.dialect.forUpdate
        if let row = try db.fetchRow(select, [id]) {
            for (offset, member) in identity.enumerated() where row[data.count + offset] != value(member.index) {
                throw StoreError.conflict("The \(schema.noun) \(id) exists with another \(schema.members[member.index].name).")
            }
            if data.indices.allSatisfy({ row[$0] == value(data[$0].index) }) {
                outcome = .unchanged
            } else {
                let assignments = data.map { "\($0.column) = ?" }.joined(separator: ", ")
                try db.execute(
                    "UPDATE \(schema.table) SET \(assignments), updated_at = \(greatest)(?, created_at), version = \(greatest)(version + 1, ?) WHERE id = ?",
                    data.map { value($0.index) } + [stamp("updated_at"), stamp("version"), id])
                outcome = .updated
            }
        } else {
            for (index, field) in schema.members.enumerated() {
                guard case let .id(reference?) = field.kind, reference.table != schema.table, let referenced = values.values[index]?.text else { continue }
                guard try db.exists("SELECT 1 FROM \(reference.table) WHERE id = ?", [referenced]) else {
                    throw StoreError.invalid([reference.missing.at(pointer + field.pointer)])
                }
            }
            try rules.checkNew?(db, values, pointer)
            let columns = ["id"] + inserted.map(\.column) + ["created_at", "updated_at", "version"]
            try db.execute(
                insertStatement(schema.table, columns),
                [id] + inserted.map { value($0.index) } + [stamp("created_at"), stamp("updated_at"), stamp("version")])
            outcome = .created
        }
        if let applyNested = rules.applyNested {
            guard let pk = try db.fetchValue("SELECT pk FROM \(schema.table) WHERE id = ?", [id]).int64 else { throw StoreError.notFound }
            if try applyNested(db, values, pk, pointer), outcome == .unchanged {
                try db.execute(
                    "UPDATE \(schema.table) SET updated_at = \(greatest)(?, created_at), version = \(greatest)(version + 1, ?) WHERE pk = ?",
                    [stamp("updated_at"), stamp("version"), pk])
                outcome = .updated
            }
        }
        return outcome
    }
}
