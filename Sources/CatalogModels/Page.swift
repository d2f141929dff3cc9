/// One page of a list: `{"items":[…],"nextCursor":"…"}`.
public struct Page<Item: Codable & Sendable & Hashable>: Codable, Sendable, Hashable {
    /// The items on this page, in the list's order.
    public var items: [Item]
    /// Pass as `cursor` to get the next page; absent on the last page.
    public var nextCursor: String?

    /// Creates a page.
    public init(items: [Item], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}
