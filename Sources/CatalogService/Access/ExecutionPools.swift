import Foundation
import HTTPServer

/// The largest request bodies, by what a route reads. Each fits the largest legal
/// document with room to spare (every text at its byte limit, even written with `\u`
/// escapes), so a client cannot make the server hold or parse more than a document can be.
enum BodyLimits {
    /// One resource, comment, user, key or entry (the default): 256 KiB.
    static let document = 256 * 1024
    /// A whole playlist order or an import: the server's body limit (`--max-body-size`).
    static let unbounded = Int.max
}

/// The pool that serves every request that reads the database when reads wait on a
/// network (PostgreSQL): no event loop ever waits for the database. Its threads each
/// hold a read connection while they work. Client addresses take turns, each with a
/// share of the queue (``WorkPool``), so one address's flood (of requests with keys
/// the server must look up before it can bill them) delays another's by at most a
/// request per thread; a full queue or share answers 503 at once.
enum DatabaseWork {
    static let threads = 16
    static let pool = WorkPool(name: "database", threads: threads, queueLimit: 1024, perCaller: 64)
}

/// The pool where requests with large bodies are read and run (``BodyLimits``): half the
/// cores, so the event loops always keep one, and a short queue (a full one answers 503).
enum LargeBodies {
    /// The largest body read on an event loop (a third of a millisecond to parse, at most).
    static let onLoop = 32 * 1024
    /// Client addresses take turns, each holding at most 8 bodies queued or running.
    static let pool = WorkPool(name: "bodies", threads: max(1, ProcessInfo.processInfo.activeProcessorCount / 2), queueLimit: 64, perCaller: 8)
}

/// The pool where images are decoded and encoded (uploads, renditions, originals fetched
/// from the store): half the cores, so the event loops always keep one, and a short queue
/// (a full one answers 503 at once); a caller holds at most 4 of its 32 places. Started at
/// the first image worked on, like libvips itself.
enum ImageWork {
    static let pool = WorkPool(name: "images", threads: max(1, ProcessInfo.processInfo.activeProcessorCount / 2), queueLimit: 32, perCaller: 4)
}

/// The pool for expensive reads: half the cores, so the event loops always keep a core,
/// and a short queue (a full one answers 503 at once). Callers (a user, or an anonymous
/// client's address) take turns, each holding at most 8 reads queued or running: one
/// caller's searches delay another's by a turn, and never fill the queue alone. On
/// PostgreSQL a search without a parent is sent from the event loop instead, and comes here
/// only when the loop's lane for searches cannot take it (``Endpoint/read(isExpensive:_:onLoop:)``).
enum ExpensiveReads {
    static let threads = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
    static let pool = WorkPool(name: "reads", threads: threads, queueLimit: 64, perCaller: 8)
    /// The work one expensive read may do before it is interrupted.
    static let allowance: Duration = .seconds(1)
}
