import CatalogModels
import Foundation

/// What keeps webhook bookkeeping bounded: each endpoint's waiting deliveries, and the
/// ended ones kept to be looked at.
extension WebhookQueue {
    /// Drops the oldest waiting deliveries of each endpoint past `limit` (those no one
    /// holds), counting them on the endpoint. - Returns: each endpoint's waiting
    /// deliveries after that, and how many were dropped now.
    package func bound(backlog limit: Int, now: Int64) throws(StoreError) -> (pending: [CatalogID: Int], dropped: Int) {
        try guarded {
            try database.write(atomic: true, background: true) { db in
                var pending: [CatalogID: Int] = [:]
                var dropped = 0
                for id in try db.fetchColumn("SELECT id FROM webhooks").compactMap({ $0.string.flatMap(CatalogID.init) }) {
                    var count = try db.fetchValue("SELECT count(*) FROM webhook_deliveries WHERE webhook_id = ? AND status = 'pending'", [id.rawValue]).int ?? 0
                    if count > limit {
                        let changed = try db.execute(
                            """
                            UPDATE webhook_deliveries SET status = 'dropped', next_attempt_at = NULL, updated_at = ? WHERE seq IN (
                                SELECT seq FROM webhook_deliveries WHERE webhook_id = ? AND status = 'pending' AND (locked_until IS NULL OR locked_until < ?)
                                ORDER BY seq LIMIT ?)
                            """, [now, id.rawValue, now, count - limit])
                        try db.execute("UPDATE webhooks SET dropped = dropped + ? WHERE id = ?", [changed, id.rawValue])
                        count -= changed
                        dropped += changed
                    }
                    pending[id] = count
                }
                return (pending, dropped)
            }
        }
    }

    /// Deletes the deliveries that ended before `endedBefore` (milliseconds), and those
    /// past the newest `keep` ended ones of each endpoint, then the messages no delivery
    /// needs any more; at most `limit` rows of each. - Returns: how many deliveries went.
    package func purge(endedBefore: Int64, keep: Int, limit: Int = 5000) throws(StoreError) -> Int {
        var total = 0
        // Rounds of at most `limit` each, so that no one transaction holds the writer long.
        for _ in 0..<100 {
            let gone = try purgeRound(endedBefore: endedBefore, keep: keep, limit: limit)
            total += gone
            if gone < limit { break }
        }
        return total
    }

    private func purgeRound(endedBefore: Int64, keep: Int, limit: Int) throws(StoreError) -> Int {
        try guarded {
            try database.write(atomic: true, background: true) { db in
                var gone = 0
                var cutoffs: [(String, Int64)] = []
                for id in try db.fetchColumn("SELECT id FROM webhooks").compactMap(\.string) {
                    if let seq = try db.fetchValue(
                        "SELECT seq FROM webhook_deliveries WHERE webhook_id = ? AND status <> 'pending' ORDER BY seq DESC LIMIT 1 OFFSET ?", [id, keep]
                    ).int64 {
                        cutoffs.append((id, seq))
                    }
                }
                let ended = "SELECT seq FROM webhook_deliveries WHERE status <> 'pending' AND "
                var doomed = try db.fetchColumn(ended + "updated_at < ? LIMIT ?", [endedBefore, limit]).compactMap(\.int64)
                for (id, seq) in cutoffs where doomed.count < limit {
                    doomed += try db.fetchColumn(ended + "webhook_id = ? AND seq <= ? LIMIT ?", [id, seq, limit - doomed.count]).compactMap(\.int64)
                }
                for chunk in stride(from: 0, to: doomed.count, by: 500).map({ Array(doomed[$0..<min($0 + 500, doomed.count)]) }) {
                    let list = Self.placeholders(chunk.count)
                    try db.execute("DELETE FROM webhook_attempts WHERE delivery_seq IN (\(list))", SQLArguments(chunk))
                    gone += try db.execute("DELETE FROM webhook_deliveries WHERE seq IN (\(list))", SQLArguments(chunk))
                }
                try db.execute(
                    """
                    DELETE FROM webhook_messages WHERE id IN (
                        SELECT m.id FROM webhook_messages m WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.message_id = m.id) LIMIT ?)
                    """, [limit])
                return gone
            }
        }
    }
}
