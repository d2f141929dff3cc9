import CCurl
import Foundation

/// Many `POST`s at once on one thread, through libcurl's multi interface (connections
/// kept and reused per host, TLS verified against the system's trust store, no redirect
/// followed, no proxy used), every socket's address checked by an ``AddressPolicy``
/// before it is made. Used from one thread; ``wakeup()`` from any.
public final class HTTPSender: @unchecked Sendable {
    /// One `POST` to make.
    public struct Request: Sendable {
        /// What the outcome is matched by.
        public var tag: Int64
        public var url: String
        /// Header lines (`Name: value`).
        public var headers: [String]
        public var body: [UInt8]
        /// The most bytes of the answer's body kept (the exchange stops past them).
        public var responseLimit: Int
        public var timeoutMilliseconds: Int

        public init(tag: Int64, url: String, headers: [String], body: [UInt8], responseLimit: Int, timeoutMilliseconds: Int) {
            self.tag = tag
            self.url = url
            self.headers = headers
            self.body = body
            self.responseLimit = responseLimit
            self.timeoutMilliseconds = timeoutMilliseconds
        }
    }

    /// What became of a ``Request``.
    public struct Outcome: Sendable {
        public let tag: Int64
        /// The answer's status, when one came.
        public let status: Int?
        /// The start of its body.
        public let body: [UInt8]
        public let durationMicroseconds: Int64
        /// Why no answer came (or the policy's refusal), when none did.
        public let error: String?

        public init(tag: Int64, status: Int?, body: [UInt8], durationMicroseconds: Int64, error: String?) {
            self.tag = tag
            self.status = status
            self.body = body
            self.durationMicroseconds = durationMicroseconds
            self.error = error
        }
    }

    /// A failure to start libcurl.
    public struct Unavailable: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The policy, kept alive for the C callback that reads it.
    private final class PolicyBox {
        let policy: AddressPolicy
        init(_ policy: AddressPolicy) { self.policy = policy }
    }

    private let box: PolicyBox
    private let sender: OpaquePointer

    /// A sender checking addresses with `policy`, trusting `caFile` (a PEM bundle) besides
    /// the system's CAs, keeping at most `maxConnections` idle connections.
    public init(policy: AddressPolicy, caFile: String? = nil, maxConnections: Int = 256) throws {
        box = PolicyBox(policy)
        let admit: ccurl_admit_fn = { context, family, address, _, plainHTTP, reason, reasonSize in
            guard let context, let address, let reason else { return 1 }
            let policy = Unmanaged<PolicyBox>.fromOpaque(context).takeUnretainedValue().policy
            let count = family == AF_INET ? 4 : 16
            guard let ip = IPAddress(bytes: Array(UnsafeBufferPointer(start: address, count: count))) else { return 1 }
            guard let refusal = policy.refusal(ip, plainHTTP: plainHTTP != 0) else { return 0 }
            let text = Array(refusal.utf8.prefix(reasonSize - 1))
            text.withUnsafeBufferPointer { source in
                reason.withMemoryRebound(to: UInt8.self, capacity: reasonSize) { target in
                    target.update(from: source.baseAddress!, count: text.count)
                    target[text.count] = 0
                }
            }
            return 1
        }
        guard let sender = ccurl_sender_new(admit, Unmanaged.passUnretained(box).toOpaque(), caFile, maxConnections) else {
            throw Unavailable(description: "libcurl (libcurl.so.4, Debian's libcurl4) cannot be loaded: " + String(cString: ccurl_load_failure()))
        }
        self.sender = sender
    }

    deinit {
        ccurl_sender_free(sender)
    }

    /// Starts `request`. - Returns: false when libcurl refused it (out of memory).
    @discardableResult
    public func add(_ request: Request) -> Bool {
        let headers = request.headers.map { strdup($0) }
        defer { for line in headers { free(line) } }
        let pointers = headers.map { UnsafePointer($0) }
        return pointers.withUnsafeBufferPointer { lines in
            request.body.withUnsafeBufferPointer { body in
                ccurl_sender_add(
                    sender, request.tag, request.url, lines.baseAddress, lines.count, body.baseAddress, body.count, request.responseLimit,
                    request.timeoutMilliseconds) == 0
            }
        }
    }

    /// Moves the transfers on, waiting at most `milliseconds` for one (or a wakeup).
    /// - Returns: how many are still running.
    @discardableResult
    public func run(waitingAtMost milliseconds: Int) -> Int {
        Int(ccurl_sender_run(sender, Int32(milliseconds)))
    }

    /// The next finished transfer, if one is.
    public func next() -> Outcome? {
        var outcome = ccurl_outcome()
        guard ccurl_sender_next(sender, &outcome) == 1 else { return nil }
        defer { ccurl_outcome_free(&outcome) }
        let body = outcome.body.map { Array(UnsafeBufferPointer(start: $0, count: outcome.body_length)) } ?? []
        let error = withUnsafeBytes(of: outcome.error) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return Outcome(
            tag: outcome.tag, status: outcome.status > 0 ? Int(outcome.status) : nil, body: body, durationMicroseconds: outcome.duration_us,
            error: error.isEmpty ? nil : error)
    }

    /// Ends a wait in ``run(waitingAtMost:)`` early.
    public func wakeup() {
        ccurl_sender_wakeup(sender)
    }
}
