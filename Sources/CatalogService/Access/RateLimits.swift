import Foundation
import HTTPServer
import Synchronization

/// What a request spends from its caller's budgets.
public enum RateClass: String, Sendable, CaseIterable {
    /// `GET` and `HEAD` that read an indexed page or resource.
    case read
    /// `POST`, `PUT`, `PATCH`, `DELETE`.
    case write
    /// Searches, geographic lists, imports and backups.
    case expensive
}

/// One budget: `quota` requests, refilled evenly over `window` seconds (a token bucket
/// that holds at most `quota`).
public struct RatePolicy: Sendable, Hashable {
    /// The most requests at once (the bucket's size).
    public var quota: Int
    /// The seconds in which an empty bucket fills again.
    public var window: Int

    /// A budget of `quota` requests per `window` seconds.
    public init(quota: Int, window: Int) {
        self.quota = quota
        self.window = window
    }

    /// The defaults: 1,200 reads, 300 writes and 60 expensive requests per minute.
    public static let defaults: [RateClass: RatePolicy] = [
        .read: RatePolicy(quota: 1200, window: 60),
        .write: RatePolicy(quota: 300, window: 60),
        .expensive: RatePolicy(quota: 60, window: 60),
    ]

    /// Parses `read=1200/60,write=300/60,expensive=60/60` (any subset; the rest keep
    /// their defaults) into budgets, or `off` into `.some(nil)`; `nil` when malformed.
    public static func parse(_ text: String) -> [RateClass: RatePolicy]?? {
        if text == "off" { return .some(nil) }
        var policies = defaults
        for part in text.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, let rateClass = RateClass(rawValue: String(pair[0])) else { return nil }
            let numbers = pair[1].split(separator: "/", maxSplits: 1)
            guard numbers.count == 2, let quota = Int(numbers[0]), let window = Int(numbers[1]),
                (1...1_000_000).contains(quota), (1...86_400).contains(window)
            else { return nil }
            policies[rateClass] = RatePolicy(quota: quota, window: window)
        }
        return .some(policies)
    }
}

/// Token buckets per caller: per user (all its API keys and identity tokens together),
/// and per client address (an IPv6 client's /64) for anonymous callers and failed
/// credentials.
/// Each class of request has its own budget, so a client that spends its searches can
/// still read. Every answer carries the budget it spent from, as the IETF httpapi
/// `RateLimit-Policy` and `RateLimit` fields; a request over its budget gets 429 with
/// `Retry-After`. Memory is bounded: each shard holds at most a few thousand callers and
/// forgets those whose buckets are full again (they would start full anyway), then the
/// least recently seen.
final class RateLimiter: Sendable {
    /// The outcome of spending one token.
    struct Decision: Sendable {
        let allowed: Bool
        /// The response fields that describe the budget.
        let headers: [(name: String, value: String)]
    }

    private struct Bucket {
        var tokens: Double
        var updated: Int64
    }

    private struct Key: Hashable {
        let rateClass: RateClass
        let partition: String
    }

    private let policies: [RateClass: RatePolicy]
    /// Each policy's name (`"1200-per-60s"`) and its `RateLimit-Policy` field.
    private let names: [RateClass: String]
    private let policyFields: [RateClass: String]
    private final class Shard: Sendable {
        let buckets = Mutex<[Key: Bucket]>([:])
    }

    private let shards: [Shard]
    private static let shardCapacity = 4096
    /// Requests refused, by class.
    private let refusals = Mutex<[RateClass: Int]>([:])

    init(policies: [RateClass: RatePolicy]) {
        self.policies = policies
        let names = policies.mapValues { "\"\($0.quota)-per-\($0.window)s\"" }
        self.names = names
        policyFields = Dictionary(
            uniqueKeysWithValues: policies.compactMap { rateClass, policy in
                names[rateClass].map { (rateClass, "\($0);q=\(policy.quota);w=\(policy.window)") }
            })
        shards = (0..<16).map { _ in Shard() }
    }

    /// Requests refused by class since start.
    var refused: [RateClass: Int] { refusals.withLock { $0 } }

    /// The budget a caller spends from: its user's (every key and token of a user shares
    /// it: more keys are not more budget), or its address's when anonymous.
    static func partition(_ caller: Caller, _ request: HTTPRequest) -> String {
        if let user = caller.userID { "user " + user.rawValue } else { "address " + request.clientAddress }
    }

    /// Spends one token of `rateClass` from `partition`'s bucket when it has one.
    func take(_ rateClass: RateClass, partition: String) -> Decision {
        settle(rateClass, partition: partition) { tokens in
            guard tokens >= 1 else { return false }
            tokens -= 1
            return true
        }
    }

    /// Whether `partition` has a token of `rateClass`, spending none (for work whose cost
    /// is known only once done, ``charge(_:partition:)`` then bills it).
    func check(_ rateClass: RateClass, partition: String) -> Decision {
        settle(rateClass, partition: partition) { $0 >= 1 }
    }

    /// Bills one token of `rateClass` for work already done, into debt if need be (down to
    /// a whole window's quota below zero): later requests that need the budget wait until
    /// it is paid.
    func charge(_ rateClass: RateClass, partition: String) {
        let quota = Double(policies[rateClass]?.quota ?? 0)
        _ = settle(rateClass, partition: partition) { tokens in
            tokens = max(-quota, tokens - 1)
            return true
        }
    }

    /// Refills `partition`'s bucket of `rateClass`, lets `decide` spend from it, and returns
    /// the decision with the rate limit fields (and `Retry-After` when refused).
    private func settle(_ rateClass: RateClass, partition: String, _ decide: (inout Double) -> Bool) -> Decision {
        guard let policy = policies[rateClass], let name = names[rateClass], let field = policyFields[rateClass] else {
            return Decision(allowed: true, headers: [])
        }
        let key = Key(rateClass: rateClass, partition: partition)
        let now = MonotonicClock.milliseconds()
        let rate = Double(policy.quota) / Double(policy.window) / 1000  // tokens per millisecond
        let capacity = Double(policy.quota)
        var hasher = Hasher()
        hasher.combine(key)
        let shard = shards[Int(UInt(bitPattern: hasher.finalize()) % UInt(shards.count))]
        let (allowed, tokens) = shard.buckets.withLock { buckets -> (Bool, Double) in
            var bucket = buckets[key] ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = min(capacity, bucket.tokens + Double(now - bucket.updated) * rate)
            bucket.updated = now
            let allowed = decide(&bucket.tokens)
            if buckets[key] == nil, buckets.count >= Self.shardCapacity { evict(&buckets, now: now) }
            buckets[key] = bucket
            return (allowed, bucket.tokens)
        }
        let reset = Int(((capacity - tokens) / rate / 1000).rounded(.up))
        var headers: [(name: String, value: String)] = [("RateLimit-Policy", field), ("RateLimit", "\(name);r=\(max(0, Int(tokens)));t=\(reset)")]
        if !allowed {
            refusals.withLock { $0[rateClass, default: 0] += 1 }
            headers.append(("Retry-After", String(max(1, Int(((1 - tokens) / rate / 1000).rounded(.up))))))
        }
        return Decision(allowed: allowed, headers: headers)
    }

    /// Forgets the buckets that are full again; when that frees less than a quarter, also
    /// the least recently used half (an attacker's many partitions cannot reset everyone's).
    private func evict(_ buckets: inout [Key: Bucket], now: Int64) {
        buckets = buckets.filter { key, bucket in
            guard let policy = policies[key.rateClass] else { return false }
            let rate = Double(policy.quota) / Double(policy.window) / 1000
            return bucket.tokens + Double(now - bucket.updated) * rate < Double(policy.quota)
        }
        guard buckets.count > Self.shardCapacity * 3 / 4 else { return }
        let cutoff = buckets.values.map(\.updated).sorted()[buckets.count / 2]
        buckets = buckets.filter { $0.value.updated > cutoff }
    }
}

/// An error that carries response fields to add to its problem document (the rate
/// limit fields of the request that failed).
struct ErrorWithHeaders: Error, @unchecked Sendable {
    let error: any Error
    let headers: [(name: String, value: String)]
}

extension APIError {
    /// 429: over the caller's budget of this class of request. The connection closes
    /// after it, so requests pipelined behind it are not answered one by one.
    static func tooManyRequests(_ rateClass: RateClass) -> APIError {
        APIError(
            status: HTTPStatus(code: 429), code: "rateLimited",
            detail: "Too many \(rateClass.rawValue) requests; retry after the number of seconds in Retry-After.", closesConnection: true)
    }
}
