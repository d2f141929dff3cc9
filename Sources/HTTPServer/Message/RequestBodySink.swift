/// Where a streamed request body goes: for routes whose bodies are too large to hold
/// (``Handler/streamingBody()``), such as a video upload. The route's handler sees the
/// request's head first (an empty ``HTTPRequest/body``), decides whether to take the body
/// (who calls, whether it fits), and then hands a sink to ``Responder/receiveBody(into:)``.
/// The connection then gives the sink the body's bytes as they arrive, never holding
/// more than one read of them, and tells it when the body ended; the sink answers through
/// the same ``Responder`` once it has done with them.
///
/// A handler that answers without taking the body refuses it: the connection then skips
/// it when it has all arrived, and otherwise closes after the answer.
public protocol RequestBodySink: AnyObject, Sendable {
    /// Takes the next bytes of the body, on the connection's event loop: it must be quick
    /// (a write to a file's page cache, not an `fsync`). Returning false takes no more:
    /// the rest of the body is not read, and the sink answers the request itself.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The body ended: all of it arrived (`complete`; the sink now answers through its
    /// responder), or the client went away, was too slow or sent a malformed chunk (no
    /// answer is read any more, but what arrived is the sink's to keep or drop). Called
    /// once, on the connection's event loop, and never after ``receive(_:)`` refused.
    func end(complete: Bool)
}

/// What a request's head says of the body a streaming route has not read yet.
struct UnreadBody {
    /// Bytes still to come, for a body framed by `Content-Length`.
    var remaining: Int?
    /// The decoder of a chunked body.
    var decoder: ChunkedDecoder?
    /// Whether the client waits for `100 Continue` before sending it.
    var expectsContinue: Bool
}
