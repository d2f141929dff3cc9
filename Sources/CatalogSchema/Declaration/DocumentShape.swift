import CatalogModels
import Foundation

/// What one kind of document carries — a creation body, an edit, an import record — and
/// the reader of such documents: each member against its field's kind and rule, one
/// error per failing field, unknown and read-only members included.
package struct DocumentShape: Sendable {
    /// The fields values are read into (their order is the order of ``FieldValues``).
    package let fields: [SchemaField]
    /// Which of ``fields`` the document carries.
    private var accepted: [Bool]
    /// Which of them it must carry.
    private var required: [Bool]
    /// Members refused as read-only (set by the server); any other unaccepted member is unknown.
    private var readOnly: Set<String>

    /// A document carrying every one of `fields`, required as each field says; the members
    /// in `readOnly` are refused as read-only.
    package init(_ fields: [SchemaField], readOnly: Set<String> = []) {
        self.init(fields, accepting: { _ in true }, requiring: \.required, readOnly: readOnly)
    }

    /// A document carrying the `fields` that `accepting` selects, requiring those that
    /// `requiring` selects, and refusing the members in `readOnly` as read-only (any
    /// other unaccepted member is unknown).
    package init(_ fields: [SchemaField], accepting: (SchemaField) -> Bool, requiring: (SchemaField) -> Bool, readOnly: Set<String>) {
        self.fields = fields
        accepted = fields.map(accepting)
        required = fields.map { accepting($0) && requiring($0) }
        self.readOnly = readOnly
    }

    /// The same document without the members `names`, which it refuses as read-only
    /// (what one caller may write of a document that others write whole).
    package func excluding(_ names: Set<String>) -> DocumentShape {
        var shape = self
        shape.accepted = zip(fields, accepted).map { field, accepted in accepted && !names.contains(field.name) }
        shape.required = zip(shape.accepted, required).map { $0 && $1 }
        shape.readOnly.formUnion(names)
        return shape
    }

    /// The unknown and read-only members of `object`: the first by name listed, the rest counted.
    package func unacceptedMembers(_ object: [String: JSONValue]) -> FieldErrors {
        Self.unacceptedMembers(object, accepting: isAccepted, readOnly: readOnly)
    }

    /// The members of `object` that `accepting` refuses, the first
    /// ``Problem/maxListedErrors`` by name listed and the rest counted (without sorting
    /// them all): read-only when `readOnly` (or the stamps every resource has) hold them,
    /// unknown otherwise. A name is shown cut to ``maxShownNameScalars``.
    package static func unacceptedMembers(_ object: [String: JSONValue], accepting: (String) -> Bool, readOnly: Set<String> = []) -> FieldErrors {
        var first: [String] = []  // the smallest names refused, sorted
        var refused = 0
        for key in object.keys where !accepting(key) {
            refused += 1
            if first.count == Problem.maxListedErrors {
                guard let last = first.last, key < last else { continue }
                first.removeLast()
            }
            var low = 0, high = first.count
            while low < high {
                let middle = (low + high) / 2
                if first[middle] < key { low = middle + 1 } else { high = middle }
            }
            first.insert(key, at: low)
        }
        var errors = FieldErrors()
        for key in first {
            let shown = shownName(key)
            if readOnly.contains(key) || SchemaField.stampNames.contains(key) {
                errors.append(Violation(.readOnly, "'\(shown)' is set by the server and cannot be written.").at(SchemaField.pointer(shown)))
            } else {
                errors.append(Violation(.unknownField, "'\(shown)' is not a field of this resource.").at(SchemaField.pointer(shown)))
            }
        }
        errors.count(refused - first.count)
        return errors
    }

    /// The longest member name an error shows whole, in Unicode scalars.
    package static let maxShownNameScalars = 64

    /// `name`, cut to ``maxShownNameScalars`` with `…` when longer: an error about a
    /// member of a megabyte's name stays small.
    private static func shownName(_ name: String) -> String {
        guard name.utf8.count > maxShownNameScalars, name.unicodeScalars.count > maxShownNameScalars else { return name }
        var cut = String.UnicodeScalarView()
        cut.append(contentsOf: name.unicodeScalars.prefix(maxShownNameScalars))
        return String(cut) + "…"
    }

    private func isAccepted(_ key: String) -> Bool {
        for index in fields.indices where accepted[index] && fields[index].name == key { return true }
        return false
    }

    /// The errors a merge patch has on its own, found before any stored document is read:
    /// its unaccepted members, `null` for a required field, and every value that breaks
    /// its field's rules. A patch without them can still fail once merged (a rule across
    /// fields), but most bad patches are refused before they reach the writer.
    package func patchErrors(_ patch: [String: JSONValue]) -> FieldErrors {
        var errors = unacceptedMembers(patch)
        for index in fields.indices where accepted[index] {
            let field = fields[index]
            guard let raw = patch[field.name] else { continue }
            if raw == .null {
                if required[index] && field.defaultValue == nil { errors.append(Violation(.required, "'\(field.name)' is required.").at(field.pointer)) }
            } else if case let .failed(failures) = Self.value(raw, of: field) {
                errors.append(contentsOf: failures)
            }
        }
        return errors
    }

    /// Reads `object`: its values (absent optional members take their default, or null)
    /// and every error, the unaccepted members first, then field by field.
    package func read(_ object: [String: JSONValue]) -> (values: FieldValues, errors: FieldErrors) {
        var errors = unacceptedMembers(object)
        var values = [FieldValue?](repeating: nil, count: fields.count)
        for index in fields.indices where accepted[index] {
            let field = fields[index]
            guard let raw = object[field.name], raw != .null else {
                if required[index] {
                    errors.append(Violation(.required, "'\(field.name)' is required.").at(field.pointer))
                } else {
                    values[index] = field.defaultValue ?? .null
                }
                continue
            }
            switch Self.value(raw, of: field) {
            case let .value(value): values[index] = value
            case let .failed(failures): errors.append(contentsOf: failures)
            }
        }
        return (FieldValues(fields: fields, values: values), errors)
    }

    /// The longest text normalized before its rule is checked: past it, no field's limit
    /// can be met anyway.
    private static let maxNormalizedBytes = 64 * 1024

    /// The value of `raw` for `field`, or why it is not one.
    private static func value(_ raw: JSONValue, of field: SchemaField) -> Outcome {
        func fail(_ violation: Violation) -> Outcome { .failed(FieldErrors([violation.at(field.pointer)])) }
        func mistyped(_ expected: String) -> Outcome {
            fail(Violation(.invalidType, "Must be \(expected), not \(raw.typeName)."))
        }
        switch (field.kind, raw) {
        case let (.text(rule), .string(text)):
            // Checked as stored: in NFC (a text far over any limit is refused as sent).
            let stored = text.utf8.count <= Self.maxNormalizedBytes ? Rules.normalized(text) : text
            return rule.violation(stored).map(fail) ?? .value(.text(stored))
        case let (.url, .string(text)):
            switch Rules.parseWebURL(text) {
            case let .success(url): return .value(.text(url.absoluteString))
            case let .failure(violation): return fail(violation)
            }
        case let (.number(rule), .number(number)):
            return rule.violation(number).map(fail) ?? .value(.real(number))
        case let (.integer(rule), .number(number)):
            guard number.rounded() == number, abs(number) <= maxExactInteger else { return mistyped("an integer") }
            return rule.violation(Int(number)).map(fail) ?? .value(.integer(Int64(number)))
        case let (.boolean, .bool(flag)):
            return .value(.integer(flag ? 1 : 0))
        case let (.timestamp, .string(text)):
            guard let date = Timestamp.date(from: text) else {
                return fail(Violation(.invalidFormat, "Must be an RFC 3339 date-time, such as 2025-01-31T12:00:00.000Z."))
            }
            return .value(.integer(Timestamp.milliseconds(date)))
        case let (.id, .string(text)):
            guard let id = CatalogID(text) else { return fail(Violation(.invalidFormat, "Must be an id (a UUID).")) }
            return .value(.text(id.rawValue))
        case let (.ids(_, maxCount), .array(elements)):
            guard elements.count <= maxCount else { return fail(Violation(.tooLong, "Must hold at most \(maxCount) ids.")) }
            var ids: [CatalogID] = []
            var errors = FieldErrors()
            for (offset, element) in elements.enumerated() {
                if case let .string(text) = element, let id = CatalogID(text) {
                    ids.append(id)
                } else {
                    errors.append(Violation(.invalidFormat, "Must be an id (a UUID).").at(field.pointer + "/\(offset)"))
                }
            }
            return errors.isEmpty ? .value(.ids(ids)) : .failed(errors)
        case let (.documents(shape, maxCount), .array(elements)):
            guard elements.count <= maxCount else { return fail(Violation(.tooLong, "Must hold at most \(maxCount) elements.")) }
            var documents: [FieldValues] = []
            var errors = FieldErrors()
            for (offset, element) in elements.enumerated() {
                let pointer = field.pointer + "/\(offset)"
                guard case let .object(object) = element else {
                    errors.append(Violation(.invalidType, "Must be an object, not \(element.typeName).").at(pointer))
                    continue
                }
                let (values, failures) = shape.read(object)
                documents.append(values)
                errors.append(contentsOf: failures, prefixing: pointer)
            }
            return errors.isEmpty ? .value(.documents(documents)) : .failed(errors)
        case (.text, _), (.url, _), (.timestamp, _), (.id, _): return mistyped("a string")
        case (.number, _): return mistyped("a number")
        case (.integer, _): return mistyped("an integer")
        case (.boolean, _): return mistyped("a boolean")
        case (.ids, _), (.documents, _): return mistyped("an array")
        case let (.image, .object(members)):
            return ImageMember.read(members, at: field.pointer).map { .value(.text($0)) } ?? fail(ImageMember.invalid)
        case (.video, .object):
            // Carried in exports, never imported (``SchemaField/ImportRole/ignored``).
            return .value(.null)
        case (.resource, _), (.image, _), (.video, _): return mistyped("an object")
        }
    }

    /// A member's value, or why it is not one.
    private enum Outcome {
        case value(FieldValue)
        case failed(FieldErrors)
    }

    /// The largest integer every JSON reader holds exactly (2^53 − 1).
    package static let maxExactInteger = 9_007_199_254_740_991.0
}

extension FieldError {
    /// This error with `prefix` before its pointer (the error of a nested document).
    package func prefixed(_ prefix: String) -> FieldError {
        FieldError(pointer: prefix + pointer, code: code, message: message)
    }
}
