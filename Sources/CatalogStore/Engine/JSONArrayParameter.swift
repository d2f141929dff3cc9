/// A JSON array as one bound parameter, for statements that take many values at once
/// through ``SQLDialect/jsonElements(_:)`` (`json_each` on SQLite, `json_array_elements_text`
/// on PostgreSQL).
enum JSONArrayParameter {
    /// The array of `elements`, already encoded as JSON, or, when `quoted`, strings that
    /// need no escapes (ids), built in one buffer.
    static func text(_ elements: some Sequence<String>, quoted: Bool = false) -> String {
        var text = "["
        text.reserveCapacity(elements.underestimatedCount * (quoted ? 40 : 8) + 2)
        for (index, element) in elements.enumerated() {
            if index > 0 { text.append(",") }
            if quoted { text.append("\"") }
            text.append(element)
            if quoted { text.append("\"") }
        }
        text.append("]")
        return text
    }
}
