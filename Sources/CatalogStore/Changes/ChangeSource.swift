import CatalogModels
import Foundation

/// A log of changes a feed serves (``ChangeLog``: the catalog's; ``ViewerChangeLog``: each
/// viewer's own state), in one `seq` order that is commit order, so what a reader sees of
/// it is always a prefix. The feed's long-polls and event streams wait on it the same way.
public protocol ChangeSource: Sendable {
    /// Fired after commits (which may have logged changes).
    var commits: CommitSignal { get }

    /// The log's highest `seq`.
    func highWater() throws(StoreError) -> Int64

    /// The changes after `seq` that match `filter`, at most `limit` and about `maxBytes` of
    /// JSON, read from one snapshot (with a `viewer`, only what it may see).
    func read(after seq: Int64, filter: ChangeFilter, viewer: Viewer?, limit: Int, maxBytes: Int) throws(StoreError) -> ChangeBatch

    /// Checks that a reader of `filter` can continue from `token` (made for `catalog`, the
    /// feed's scope; within `retention`; not ahead of the log).
    func check(_ token: ChangeToken, catalog: String, retention: Duration, now: Int64, filter: ChangeFilter) throws(StoreError)

    /// The readers (by ``ChangeFilter/user``) with changes after `seq` up to `top`, when the
    /// log knows them (one viewer's changes concern that viewer alone); `nil`: any reader
    /// may have some.
    func touched(after seq: Int64, through top: Int64) throws(StoreError) -> Set<CatalogID>?

    /// Deletes the deletions recorded before `cutoff` (milliseconds since 1970).
    func purge(before cutoff: Int64, completion: @escaping @Sendable (Result<Int, any Error>) -> Void)
}

extension ChangeSource {
    /// Any reader may have changes.
    public func touched(after seq: Int64, through top: Int64) throws(StoreError) -> Set<CatalogID>? { nil }
}
