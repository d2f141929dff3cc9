import CatalogModels

/// A field's value as read from a document and as it is kept: what a column holds, or
/// (for members that are not columns) a list of ids or of documents.
package enum FieldValue: Sendable, Equatable {
    case null
    case text(String)
    case real(Double)
    case integer(Int64)
    /// An array of ids.
    case ids([CatalogID])
    /// An array of documents.
    case documents([FieldValues])
}

/// The values read from one document, field by field in the order of its shape's fields
/// (`nil`: not part of this document).
package struct FieldValues: Sendable, Equatable {
    /// The fields, in the order of ``values``.
    package let fields: [SchemaField]
    package var values: [FieldValue?]

    package init(fields: [SchemaField], values: [FieldValue?]) {
        self.fields = fields
        self.values = values
    }

    package static func == (lhs: FieldValues, rhs: FieldValues) -> Bool {
        lhs.fields.map(\.name) == rhs.fields.map(\.name) && lhs.values == rhs.values
    }

    /// The value of the field with this API name.
    package subscript(name: String) -> FieldValue? {
        fields.firstIndex { $0.name == name }.flatMap { values[$0] }
    }

    /// The value of the field kept in `column`.
    package subscript(column column: String) -> FieldValue? {
        fields.firstIndex { $0.column == column }.flatMap { values[$0] }
    }

    /// The field kept in `column`.
    package func field(column: String) -> SchemaField? {
        fields.first { $0.column == column }
    }

    /// The first field that refers to `reference`, with its value.
    package func reference(to reference: Reference) -> (field: SchemaField, value: FieldValue?)? {
        for (index, field) in fields.enumerated() {
            switch field.kind {
            case let .id(target) where target == reference: return (field, values[index])
            case let .ids(target, _) where target == reference: return (field, values[index])
            default: continue
            }
        }
        return nil
    }
}

extension FieldValue {
    /// The text, when the value is one.
    package var text: String? {
        if case let .text(text) = self { text } else { nil }
    }

    /// The integer, when the value is one.
    package var integer: Int64? {
        if case let .integer(value) = self { value } else { nil }
    }

    /// The number, when the value is one.
    package var real: Double? {
        if case let .real(value) = self { value } else { nil }
    }
}
