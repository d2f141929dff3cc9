import CatalogModels
import CatalogSchema
import CatalogStore
import HTTPServer

/// The fields a resource offers to `fields=…`, and how to mask them.
struct FieldSet: Sendable {
    /// The API names, sorted.
    let names: [String]
    let mask: @Sendable (Set<String>) -> FieldMask?

    init(_ store: ResourceStore) {
        names = store.fieldNames
        mask = { store.mask($0) }
    }

    /// Parses a `fields` value: comma-separated field names (`id` is always shown).
    func parse(_ text: String) throws(APIError) -> FieldMask {
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !names.contains(where: \.isEmpty) else {
            throw .invalidParameter("fields", "must be a comma-separated list of field names: \(self.names.joined(separator: ", ")).")
        }
        if let unknown = names.first(where: { !self.names.contains($0) }) {
            throw .invalidParameter("fields", "'\(unknown.prefix(64))' is not a field; the fields are \(self.names.joined(separator: ", ")).")
        }
        guard let mask = mask(Set(names)) else { throw .invalidParameter("fields", "names an unknown field.") }
        return mask
    }
}

/// What a single-resource `GET` asks for besides the resource: `fields` (a projection)
/// and `include` (related lists embedded in the response).
struct Representation {
    var fields: FieldMask = .all
    var embedding: [Embedding] = []
    /// Whether the response differs from the plain resource (and so gets a digest tag).
    var isShaped = false

    /// Parses the query of `request`; any other parameter, a repeated one, an unknown
    /// field or include name is a 400 naming it.
    static func parse(_ request: HTTPRequest, fields: FieldSet, includes: [String: Embedding]) throws(APIError) -> Representation {
        var shape = Representation()
        guard request.query != nil else { return shape }
        let accepted = ["fields"] + (includes.isEmpty ? [] : ["include"])
        for (name, value) in try QueryParameters.parse(request, accepted: Set(accepted)) {
            shape.isShaped = true
            if name == "fields" {
                shape.fields = try fields.parse(value)
                continue
            }
            let names = value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            var seen = Set<String>()
            for name in names {
                guard let embedding = includes[name] else {
                    throw .invalidParameter("include", "'\(name.prefix(64))' cannot be included; the choices are \(includes.keys.sorted().joined(separator: ", ")).")
                }
                guard seen.insert(name).inserted else { throw .invalidParameter("include", "names '\(name)' more than once.") }
                shape.embedding.append(embedding)
            }
        }
        return shape
    }
}

/// Query strings: each parameter at most once, and only the accepted ones.
enum QueryParameters {
    static func parse(_ request: HTTPRequest, accepted: Set<String>) throws(APIError) -> QueryValues {
        let items: [QueryItem]
        do { items = try request.queryItems() } catch { throw APIError(status: .badRequest, code: error.code, detail: error.detail) }
        var values = QueryValues()
        values.pairs.reserveCapacity(items.count)
        for item in items {
            guard accepted.contains(item.name) else {
                let choices = accepted.isEmpty ? "no parameters" : accepted.sorted().joined(separator: ", ")
                throw .invalidParameter(item.name, "unknown parameter; this request accepts \(choices).")
            }
            guard values[item.name] == nil else { throw .invalidParameter(item.name, "given more than once.") }
            values.pairs.append((item.name, item.value))
        }
        return values
    }
}

/// A request's query parameters, each named once (``QueryParameters/parse(_:accepted:)``),
/// in the order given: a handful of pairs, found by comparing names rather than hashing them.
struct QueryValues: Sequence {
    fileprivate(set) var pairs: [(name: String, value: String)] = []

    /// The value of the parameter `name`; `nil` when it was not given.
    subscript(name: String) -> String? {
        for pair in pairs where pair.name == name { return pair.value }
        return nil
    }

    func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { pairs.makeIterator() }
}
