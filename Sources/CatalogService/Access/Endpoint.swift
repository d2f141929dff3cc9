import CatalogStore
import HTTPServer

/// A route's work, given the request and its caller.
enum Endpoint: Sendable {
    /// Runs on the event loop: microseconds, never blocking (a read, a rendering).
    case inline(@Sendable (HTTPRequest, Caller) throws -> HTTPResponse)
    /// Starts work that answers later through the completion (a durable write, submitted
    /// with the ``WriteOptions`` it is given: the request's).
    case later(@Sendable (HTTPRequest, Caller, WriteOptions, @escaping Completion) throws -> Void)
    /// As ``later``, for work that may wait long for its answer (a long-poll): it is told
    /// whether the client has gone, so it can stop waiting. It reads nothing on the
    /// calling thread (its reads run on a pool of its own), so once its caller is known it
    /// starts where the request arrived.
    case waiting(@Sendable (HTTPRequest, Caller, _ isAbandoned: @escaping @Sendable () -> Bool, @escaping Completion) throws -> Void)
    /// Answers now when it can, on the event loop (a response from memory), and otherwise
    /// (returning `nil`) starts work elsewhere that answers later through the completion.
    /// A request `isExpensive` says will make that work (a rendition never made) spends
    /// from the expensive budget.
    case inlineOrLater(isExpensive: @Sendable (HTTPRequest) -> Bool, @Sendable (HTTPRequest, Caller, @escaping Completion) throws -> HTTPResponse?)
    /// Runs on the pool reserved for blocking work (a backup); the last argument says
    /// whether the client has gone (long work stops early then).
    case blocking(@Sendable (HTTPRequest, Caller, _ isAbandoned: @escaping @Sendable () -> Bool) throws -> HTTPResponse)
    /// A read that runs on the event loop when `isExpensive` says the request is cheap,
    /// and otherwise on the small pool reserved for expensive reads (searches,
    /// geographic lists), under that pool's larger ``ReadBudget``. Where reads wait on a
    /// network (PostgreSQL) a read with `onLoop`, cheap or expensive, is sent from the event
    /// loop the request arrived on without blocking it (``LoopStart``), and `body` runs on
    /// its pool (the database pool, or the expensive reads') only when it cannot; a cheap
    /// one without `onLoop` runs on the database pool.
    case read(
        isExpensive: @Sendable (HTTPRequest) -> Bool, @Sendable (HTTPRequest, Caller) throws -> HTTPResponse, onLoop: LoopStart? = nil)
    /// Takes a body too large to hold as a stream (an upload; its route streams bodies):
    /// it sees the head, and hands a sink to the responder
    /// (``Responder/receiveBody(into:)``) when it takes the body; it answers through the
    /// completion.
    case receiving(@Sendable (HTTPRequest, Caller, Responder, @escaping Completion) throws -> Void)
}

/// Starts a read of one statement from the event loop (a resource by its id, a list page
/// or, where it is one statement, a search's): true once it will answer through the completion, false when it cannot be read so
/// now (the read then runs on the pool). When the loop cannot finish it (a connection
/// lost, say) it calls `elsewhere`, which runs it on the pool.
typealias LoopStart =
    @Sendable (
        HTTPRequest, Caller, LoopReactor, _ isAbandoned: @escaping () -> Bool, _ elsewhere: @escaping () -> Void, @escaping Completion
    ) throws -> Bool

/// The caller a request's admission check found from its head, handed to its handler.
final class Admitted: Sendable {
    let caller: Caller
    init(caller: Caller) { self.caller = caller }
}
