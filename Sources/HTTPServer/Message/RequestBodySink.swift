/// Where a streamed request body goes: for routes whose bodies are too large to hold
/// (``Handler/streamingBody()``), such as a video upload. The route's handler sees the
/// request's head first (an empty ``HTTPRequest/body``), decides whether to take the body
/// (who calls, whether it fits), and then hands a sink to ``Responder/receiveBody(into:)``.
/// The connection then gives the sink the body's bytes as they arrive, never holding
/// more than one read of them, pausing while the sink asks it to (``BodyIntake/paused``),
/// and tells it when the body ended; the sink answers through the same ``Responder``
/// once it has done with them.
///
/// A handler that answers without taking the body refuses it: the connection then skips
/// it when it has all arrived, and otherwise closes after the answer.
public protocol RequestBodySink: AnyObject, Sendable {
    /// Takes the next bytes of the body, on the connection's event loop: it must be quick
    /// (a copy handed to another thread; never a disk or network wait). The bytes are
    /// lent for the call only.
    func receive(_ bytes: UnsafeRawBufferPointer) -> BodyIntake
    /// The body ended: all of it arrived (`complete`; the sink now answers through its
    /// responder), or the client went away, was too slow or sent a malformed chunk (no
    /// answer is read any more, but what arrived is the sink's to keep or drop). Called
    /// once, on the connection's event loop, and never after ``receive(_:)`` refused.
    func end(complete: Bool)
}

/// What a sink did with the bytes it was given (``RequestBodySink/receive(_:)``).
public enum BodyIntake: Sendable {
    /// Taken; more may come.
    case taken
    /// Taken, but no more until the sink calls ``Responder/resumeBody()``: the connection
    /// stops reading (the client's sending stalls in TCP), and no body deadline runs
    /// meanwhile. For a sink whose writes fall behind.
    case paused
    /// Not taken, and no more: the rest of the body is not read, and the sink answers the
    /// request itself.
    case refused
}

/// What a request's head says of the body a streaming route has not read yet.
struct UnreadBody {
    /// Bytes still to come, for a body framed by `Content-Length`.
    var remaining: Int?
    /// The decoder of a chunked body.
    var decoder: ChunkedDecoder?
    /// Whether the client waits for `100 Continue` before sending it.
    var expectsContinue: Bool
    /// The most bytes the body may have (its route's limit).
    var limit: Int
    /// How many bytes of a chunked body were decoded so far.
    var decoded = 0
    /// Whether the sink asked for no more until it resumes (``BodyIntake/paused``).
    var paused = false
}
