import CatalogStore
import Foundation
import HTTPServer
import Synchronization

/// Prometheus metrics, served at `GET /metrics` in the text exposition format 0.0.4.
///
/// Every label set is bounded, whatever clients send: a route label is a registered
/// pattern, `unmatched` or `-`; a method label is one of the methods the server
/// implements or `OTHER`; a status is a three-digit code. The series are therefore at
/// most routes × methods × statuses, and the exposition stays small.
final class Metrics: Sendable {
    /// A latency histogram with cumulative buckets, in seconds.
    struct Histogram {
        static let bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
        var buckets = [UInt64](repeating: 0, count: bounds.count)
        var count: UInt64 = 0
        var sum = 0.0

        mutating func observe(_ seconds: Double) {
            for (index, bound) in Self.bounds.enumerated() where seconds <= bound { buckets[index] += 1 }
            count += 1
            sum += seconds
        }
    }

    /// One route's series: its latency histogram and its counts by method and status (a
    /// few per route, so a list searched in order costs less than hashing a key).
    private struct RouteSeries {
        var durations = Histogram()
        var counts: [(method: String, status: Int, count: UInt64)] = []

        mutating func record(_ method: String, _ status: Int, seconds: Double) {
            durations.observe(seconds)
            if let index = counts.firstIndex(where: { $0.status == status && $0.method == method }) {
                counts[index].count += 1
            } else {
                counts.append((method, status, 1))
            }
        }
    }

    private struct State {
        /// By route label: one hash of the route per request.
        var routes: [String: RouteSeries] = [:]
        var rejected: [String: UInt64] = [:]
        var reads = Histogram()
        var writes = Histogram()
    }

    private let state = Mutex(State())
    private let buildInfo: String

    /// `engineVersion` is the engine's name and version, such as `SQLite 3.40.1`.
    init(version: String, engine: DatabaseEngine, engineVersion: String) {
        let number = engineVersion.split(separator: " ").last.map(String.init) ?? engineVersion
        buildInfo = #"catalog_build_info{version="\#(version)",engine="\#(engine.rawValue)",engine_version="\#(number)"} 1"#
    }

    /// Records an answered request (the server's request observer).
    func observe(_ request: CompletedRequest) {
        let route = request.route ?? (request.method == "-" ? "-" : "unmatched")
        // The methods the server implements; any other token counts as `OTHER`.
        let method = request.method == "-" || HTTPMethod(rawValue: request.method) != nil ? request.method : "OTHER"
        let reason = request.route == nil ? Self.rejectionReason(request) : nil
        let status = (100...599).contains(request.status) ? request.status : 0
        let seconds = Double(request.durationMicroseconds) / 1_000_000
        state.withLock { state in
            state.routes[route, default: RouteSeries()].record(method, status, seconds: seconds)
            if let reason { state.rejected[reason, default: 0] += 1 }
        }
    }

    /// Records how long a store read took.
    func observeRead(seconds: Double) { state.withLock { $0.reads.observe(seconds) } }

    /// Records how long a store write took, from submission to durable commit.
    func observeWrite(seconds: Double) { state.withLock { $0.writes.observe(seconds) } }

    /// Requests refused before any handler: parse limits, timeouts, malformed input.
    private static func rejectionReason(_ request: CompletedRequest) -> String? {
        switch request.status {
        case 408: "timeout"
        case 413: "bodyTooLarge"
        case 414: "requestLineTooLong"
        case 431: "headersTooLarge"
        case 400 where request.method == "-": "malformed"
        case 501: "notImplemented"
        default: nil
        }
    }

    /// Where the change feed's open long-polls and event streams are counted, once it runs.
    private let changeFeed = Mutex<(@Sendable () -> (waiters: Int, streams: Int))?>(nil)

    /// Counts the change feed's long-polls and streams with `counts` from now on.
    func observeChangeFeed(_ counts: @escaping @Sendable () -> (waiters: Int, streams: Int)) {
        changeFeed.withLock { $0 = counts }
    }

    private let images = Mutex<(@Sendable () -> (made: Int, diskBytes: Int, memoryBytes: Int))?>(nil)

    /// Reports the image renditions made and the rendition cache's size from `counts`.
    func observeImages(_ counts: @escaping @Sendable () -> (made: Int, diskBytes: Int, memoryBytes: Int)) {
        images.withLock { $0 = counts }
    }

    private let webhooks = Mutex<(@Sendable () -> WebhookCounters)?>(nil)

    /// Reports webhook deliveries and backlogs from `counts`.
    func observeWebhooks(_ counts: @escaping @Sendable () -> WebhookCounters) {
        webhooks.withLock { $0 = counts }
    }

    private let loopReads = Mutex<(@Sendable () -> LoopReadCounts)?>(nil)

    /// Reports the reads event loops sent over their own PostgreSQL connections from `counts`.
    func observeLoopReads(_ counts: @escaping @Sendable () -> LoopReadCounts) {
        loopReads.withLock { $0 = counts }
    }

    /// The exposition text.
    func render(server: ServerReference) -> String {
        let snapshot = state.withLock { $0 }
        var out = ""
        out += "# HELP catalog_http_requests_total Requests answered, by route pattern, method and status.\n"
        out += "# TYPE catalog_http_requests_total counter\n"
        let routes = snapshot.routes.sorted(by: { $0.key < $1.key })
        for (route, series) in routes {
            for (method, status, count) in series.counts.sorted(by: { ($0.method, $0.status) < ($1.method, $1.status) }) {
                out += "catalog_http_requests_total{route=\(Self.quoted(route)),method=\(Self.quoted(method)),status=\"\(status)\"} \(count)\n"
            }
        }
        out += "# HELP catalog_http_request_duration_seconds Time from a complete request head to the queued response, by route pattern.\n"
        out += "# TYPE catalog_http_request_duration_seconds histogram\n"
        for (route, series) in routes {
            out += Self.histogram("catalog_http_request_duration_seconds", labels: "route=\(Self.quoted(route))", series.durations)
        }
        out += "# HELP catalog_http_requests_in_flight Requests whose handler has not answered yet.\n"
        out += "# TYPE catalog_http_requests_in_flight gauge\n"
        out += "catalog_http_requests_in_flight \(server.inFlightRequests)\n"
        out += "# HELP catalog_http_open_connections Client connections open now.\n"
        out += "# TYPE catalog_http_open_connections gauge\n"
        out += "catalog_http_open_connections \(server.openConnections)\n"
        out += "# HELP catalog_http_rejected_total Requests and connections refused before reaching a handler, by reason.\n"
        out += "# TYPE catalog_http_rejected_total counter\n"
        var rejected = snapshot.rejected
        for (reason, count) in server.rejections { rejected[reason] = UInt64(count) }
        for (reason, count) in rejected.sorted(by: { $0.key < $1.key }) {
            out += "catalog_http_rejected_total{reason=\(Self.quoted(reason))} \(count)\n"
        }
        if let counts = images.withLock({ $0 })?() {
            out += "# HELP catalog_image_renditions_made_total Image renditions made (not served from the cache).\n"
            out += "# TYPE catalog_image_renditions_made_total counter\n"
            out += "catalog_image_renditions_made_total \(counts.made)\n"
            out += "# HELP catalog_image_cache_bytes Bytes of renditions cached, on disk and in memory.\n"
            out += "# TYPE catalog_image_cache_bytes gauge\n"
            out += "catalog_image_cache_bytes{tier=\"disk\"} \(counts.diskBytes)\n"
            out += "catalog_image_cache_bytes{tier=\"memory\"} \(counts.memoryBytes)\n"
        }
        if let counts = changeFeed.withLock({ $0 })?() {
            out += "# HELP catalog_change_feed_waiting Long-polls of GET /v1/changes waiting for a change.\n"
            out += "# TYPE catalog_change_feed_waiting gauge\n"
            out += "catalog_change_feed_waiting \(counts.waiters)\n"
            out += "# HELP catalog_change_feed_streams Event streams of GET /v1/changes open now.\n"
            out += "# TYPE catalog_change_feed_streams gauge\n"
            out += "catalog_change_feed_streams \(counts.streams)\n"
        }
        if let counts = webhooks.withLock({ $0 })?() {
            out += "# HELP catalog_webhook_deliveries_total Webhook attempts by result (delivered, retrying, failed), and messages dropped unsent.\n"
            out += "# TYPE catalog_webhook_deliveries_total counter\n"
            for result in ["delivered", "retrying", "failed", "dropped"] {
                out += "catalog_webhook_deliveries_total{result=\"\(result)\"} \(counts.results[result] ?? 0)\n"
            }
            out += "# HELP catalog_webhook_backlog Webhook deliveries waiting, by endpoint (counted every few seconds).\n"
            out += "# TYPE catalog_webhook_backlog gauge\n"
            for (id, pending) in counts.backlog.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                out += "catalog_webhook_backlog{webhook=\"\(id)\"} \(pending)\n"
            }
        }
        if let counts = loopReads.withLock({ $0 })?() {
            out += "# HELP catalog_db_loop_reads_total Reads of one statement sent from the event loops over their own PostgreSQL connections, "
            out += "by outcome: taken, declined (the line full, or no connection made yet: read on a pool), "
            out +=
                "handed_back (taken, then read on a pool: a connection lost or silent, a read put back once already, a heavy read no connection could take at once, the store closing).\n"
            out += "# TYPE catalog_db_loop_reads_total counter\n"
            out += "catalog_db_loop_reads_total{outcome=\"taken\"} \(counts.taken)\n"
            out += "catalog_db_loop_reads_total{outcome=\"declined\"} \(counts.declined)\n"
            out += "catalog_db_loop_reads_total{outcome=\"handed_back\"} \(counts.handedBack)\n"
            out += "# HELP catalog_db_loop_heavy_reads_total Of those reads, the heavy ones (searches, geographic lists), sent on connections "
            out += "of their own (catalog-loop-searches); declined and handed back, they are read on the expensive reads' pool.\n"
            out += "# TYPE catalog_db_loop_heavy_reads_total counter\n"
            out += "catalog_db_loop_heavy_reads_total{outcome=\"taken\"} \(counts.heavy.taken)\n"
            out += "catalog_db_loop_heavy_reads_total{outcome=\"declined\"} \(counts.heavy.declined)\n"
            out += "catalog_db_loop_heavy_reads_total{outcome=\"handed_back\"} \(counts.heavy.handedBack)\n"
            out += "# HELP catalog_db_loop_read_batches_total Batches the event loops sent those reads in, each with one Sync.\n"
            out += "# TYPE catalog_db_loop_read_batches_total counter\n"
            out += "catalog_db_loop_read_batches_total \(counts.batches)\n"
            out += "# HELP catalog_db_loop_reads_sent_total Reads sent in those batches (a read sent again counts again).\n"
            out += "# TYPE catalog_db_loop_reads_sent_total counter\n"
            out += "catalog_db_loop_reads_sent_total \(counts.sent)\n"
            out += "# HELP catalog_db_loop_reads_resent_total Reads put back in their loop's line: PostgreSQL skipped them "
            out += "(a statement before them in their batch failed), a statement they shared with other GETs by id failed, "
            out += "or a migration made their prepared statement stale.\n"
            out += "# TYPE catalog_db_loop_reads_resent_total counter\n"
            out += "catalog_db_loop_reads_resent_total \(counts.resent)\n"
            out += "# HELP catalog_db_loop_reads_shared_total Reads answered by a statement they shared with other reads of their batch "
            out += "(GETs by id sent together: one statement for all the ids; one list page asked at once: one statement).\n"
            out += "# TYPE catalog_db_loop_reads_shared_total counter\n"
            out += "catalog_db_loop_reads_shared_total \(counts.shared)\n"
            out += "# HELP catalog_db_loop_pages_unchanged_total List pages read from the event loops that PostgreSQL found "
            out += "unchanged since they were kept (the database still at the snapshot they were read in): answered as kept, no row read.\n"
            out += "# TYPE catalog_db_loop_pages_unchanged_total counter\n"
            out += "catalog_db_loop_pages_unchanged_total \(counts.unchangedPages)\n"
            out += "# HELP catalog_db_loop_connections_opened_total PostgreSQL connections the event loops have opened.\n"
            out += "# TYPE catalog_db_loop_connections_opened_total counter\n"
            out += "catalog_db_loop_connections_opened_total \(counts.connections)\n"
        }
        out += "# HELP catalog_db_read_duration_seconds Duration of database reads.\n"
        out += "# TYPE catalog_db_read_duration_seconds histogram\n"
        out += Self.histogram("catalog_db_read_duration_seconds", labels: nil, snapshot.reads)
        out += "# HELP catalog_db_write_duration_seconds Duration of database writes, from submission to durable commit.\n"
        out += "# TYPE catalog_db_write_duration_seconds histogram\n"
        out += Self.histogram("catalog_db_write_duration_seconds", labels: nil, snapshot.writes)
        out += "# HELP catalog_build_info The running build.\n"
        out += "# TYPE catalog_build_info gauge\n"
        out += buildInfo + "\n"
        return out
    }

    private static func histogram(_ name: String, labels: String?, _ histogram: Histogram) -> String {
        let prefix = labels.map { $0 + "," } ?? ""
        var out = ""
        for (bound, count) in zip(Histogram.bounds, histogram.buckets) {
            out += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(count)\n"
        }
        out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(histogram.count)\n"
        let suffix = labels.map { "{\($0)}" } ?? ""
        out += "\(name)_sum\(suffix) \(histogram.sum)\n"
        out += "\(name)_count\(suffix) \(histogram.count)\n"
        return out
    }

    /// A label value in quotes, with `\`, `"` and newlines escaped.
    private static func quoted(_ value: String) -> String {
        "\""
            + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}
