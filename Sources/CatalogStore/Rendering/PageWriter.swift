extension SQLRows {
    /// Writes `{"items":[…],"nextCursor":"…"}` from rows selected with `LIMIT limit + 1`:
    /// `item` writes each of the first `limit` rows; when a further row exists, the next
    /// cursor is what `cursor` makes of the last row on the page. The page also ends, with
    /// a cursor, once its items have taken `maxBytes` (one item is always written), so no
    /// answer grows with the size of what it lists.
    /// - Returns: the next cursor, `nil` on the last page.
    func writePage(
        limit: Int, maxBytes: Int = ListRequest.maxPageBytes, into writer: inout JSONWriter,
        item: (Self, inout JSONWriter) throws -> Void, cursor: (Self) -> String?
    ) throws -> String? {
        writer.openPage()
        let start = writer.count
        var count = 0
        var cursorOfLast: String?
        var next: String?
        while try step() {
            if let cursorOfLast {
                next = cursorOfLast
                break
            }
            if count > 0 { writer.byte(UInt8(ascii: ",")) }
            try item(self, &writer)
            count += 1
            if count == limit {
                guard let key = cursor(self) else { break }
                cursorOfLast = key
            } else if writer.count - start >= maxBytes, let key = cursor(self) {
                cursorOfLast = key
            }
        }
        writer.closePage(next: next)
        return next
    }
}

extension JSONWriter {
    /// Begins a page: `{"items":[`.
    mutating func openPage() {
        raw("{\"items\":[")
    }

    /// Ends a page after its items: `]`, the `nextCursor` member when there is a next page, and `}`.
    mutating func closePage(next: String?) {
        byte(UInt8(ascii: "]"))
        if let next {
            raw(",\"nextCursor\":")
            string(next)
        }
        byte(UInt8(ascii: "}"))
    }
}
