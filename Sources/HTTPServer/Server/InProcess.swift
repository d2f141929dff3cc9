import Foundation
import Synchronization

extension HTTPServer {
    /// Answers `request` as a connection of this server would, without a socket: the
    /// router (404, 405, `OPTIONS`), the route's admission check and body limit, its
    /// handler wherever it runs (inline, deferred, on a pool), and errors rendered by the
    /// server's renderer; a deferred answer not given within the route's request timeout is
    /// a 503, as on a connection. What only the wire adds is left out: framing,
    /// `Content-Length`, `Date`, `X-Request-Id`, CORS fields and the connection's other
    /// timeouts; a `HEAD` answer comes without its body, a file body is read into
    /// ``HTTPResponse/body``, a streaming route takes the request's whole body at once, and
    /// a streamed response body is ended at once (what it sent before it reached the
    /// exchange is not kept). The server need not
    /// be started.
    ///
    /// For tests of the application above the HTTP layer, which then need no loopback
    /// socket; tests of the HTTP layer itself (and end-to-end ones) use sockets.
    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        var request = request
        request.requestID = InProcessExchange.makeRequestID()
        if request.clientAddress.isEmpty { request.clientAddress = request.remoteAddress }
        let core = self.core
        let render: @Sendable (any Error) -> HTTPResponse = { [request] error in
            core.render(error, path: request.path, requestID: request.requestID)
        }
        let response: HTTPResponse
        do {
            response = try await Self.answer(request, core: core, render: render)
        } catch {
            response = render(error)
        }
        var answer = response
        if let stream = answer.stream {
            stream.connectionClosed()
            answer.stream = nil
        }
        if let file = answer.file {
            // No socket to send it to: its bytes become the body.
            answer.body = [UInt8](repeating: 0, count: file.count)
            let read = answer.body.withUnsafeMutableBytes { pread(file.descriptor, $0.baseAddress, file.count, off_t(file.offset)) }
            if read != file.count { answer.body = Array(answer.body.prefix(max(0, read))) }
            answer.file = nil
        }
        if request.method == .HEAD { answer.body = [] }
        return answer
    }

    private static func answer(
        _ request: HTTPRequest, core: ServerCore, render: @escaping @Sendable (any Error) -> HTTPResponse
    ) async throws
        -> HTTPResponse
    {
        var request = request
        // The parser refuses a body over the server's limit before any route is looked at.
        let limits = core.parserLimits
        if request.body.count > limits.maxBody { throw HTTPError.contentTooLarge(limit: limits.maxBody) }
        switch try core.router.resolve(method: request.method, path: request.path) {
        case let .options(allow, fields):
            var response = HTTPResponse(status: .noContent, headers: [("Allow", allow)] + fields)
            response.cacheControl = "no-store"
            return response
        case let .handler(route, parameters):
            request.pathParameters = parameters
            let handler = route.handler
            if !request.body.isEmpty || request.headers["content-length"] != nil || request.headers["transfer-encoding"] != nil {
                // As from a head: the admission check sees no body, then the body's size counts.
                if let admission = handler.admission { request.admitted = try admission(HTTPRequest(request, body: [])) }
                let limit = handler.bodyLimit(server: core.configuration.limits.maxBody)
                if request.body.count > limit { throw HTTPError.contentTooLarge(limit: limit) }
            }
            let timeout = handler.timeout?.milliseconds ?? core.timeouts.request
            // A streaming route sees the head; the body waits in the exchange until taken.
            let body = handler.streamsBody ? request.body : []
            if handler.streamsBody {
                let admitted = request.admitted
                request = HTTPRequest(request, body: [])
                request.pathParameters = parameters
                request.admitted = admitted
            }
            switch handler.kind {
            case let .inline(handle):
                return try handle(request)
            case let .deferred(handle):
                return try await InProcessExchange.answer(render: render, timeout: timeout, body: body) { responder in
                    handle(request, responder)
                    return nil
                }
            case let .either(handle):
                return try await InProcessExchange.answer(render: render, timeout: timeout, body: body) { try handle(request, $0) }
            }
        }
    }
}

extension HTTPRequest {
    /// `request` with `body` and its own id, client and admission (none).
    fileprivate init(_ request: HTTPRequest, body: [UInt8]) {
        self.init(
            method: request.method, path: request.path, query: request.query, version: request.version, headers: request.headers, body: body,
            remoteAddress: request.remoteAddress)
        requestID = request.requestID
        clientAddress = request.clientAddress
    }
}

/// One request answered in process (``HTTPServer/respond(to:)``): where its ``Responder``
/// delivers the answer, once, and runs what it is asked to run (in order, on a queue of
/// its own, as a connection's loop would).
final class InProcessExchange: Sendable {
    private let queue = DispatchQueue(label: "catalog-in-process")
    /// Who waits for the answer, or the answer that came first; `done` once delivered.
    private let state = Mutex<(waiting: CheckedContinuation<HTTPResponse, Never>?, answer: HTTPResponse?, done: Bool)>((nil, nil, false))
    private let render: @Sendable (any Error) -> HTTPResponse
    /// The body a streaming route takes (``Responder/receiveBody(into:)``).
    private let body: [UInt8]
    private static let sequence = Atomic<UInt64>(0)

    private init(render: @escaping @Sendable (any Error) -> HTTPResponse, body: [UInt8]) {
        self.render = render
        self.body = body
    }

    /// Hands the whole body to `sink` at once, as one read, and ends it (a pause is moot:
    /// nothing more comes).
    func feed(_ sink: any RequestBodySink) {
        if !body.isEmpty, body.withUnsafeBytes(sink.receive) == .refused { return }
        sink.end(complete: true)
    }

    /// An id for an in-process request.
    static func makeRequestID() -> String {
        "in-process-\(sequence.add(1, ordering: .relaxed).newValue)"
    }

    /// The answer `start` gives now (what it returns), or else through the responder it is
    /// handed, or 503 once `timeout` milliseconds have passed without one (the request then
    /// counts as abandoned).
    static func answer(
        render: @escaping @Sendable (any Error) -> HTTPResponse, timeout: Int64, body: [UInt8] = [], _ start: (Responder) throws -> HTTPResponse?
    ) async throws -> HTTPResponse {
        let exchange = InProcessExchange(render: render, body: body)
        let responder = Responder(exchange)
        if let now = try start(responder) { return now }
        return await exchange.answered(by: responder, within: timeout)
    }

    /// The answer, once delivered (at once when it already was), or 503 when `timeout`
    /// milliseconds pass first.
    private func answered(by responder: Responder, within timeout: Int64) async -> HTTPResponse {
        let expiry = Task { [self] in
            try await Task.sleep(for: .milliseconds(timeout))
            responder.ticket.abandoned.store(true, ordering: .relaxed)
            complete(.failure(SendableError(HTTPError.requestExpired)))
        }
        defer { expiry.cancel() }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> HTTPResponse? in
                guard let answer = state.answer else {
                    state.waiting = continuation
                    return nil
                }
                return answer
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func perform(_ block: @escaping @Sendable () -> Void) {
        queue.async(execute: block)
    }

    /// Delivers the answer (on the exchange's queue); later ones are ignored.
    func complete(_ result: Result<HTTPResponse, SendableError>) {
        let response: HTTPResponse
        switch result {
        case let .success(answer): response = answer
        case let .failure(error): response = render(error.error)
        }
        let waiting = state.withLock { state -> CheckedContinuation<HTTPResponse, Never>? in
            guard !state.done else { return nil }
            state.done = true
            guard let waiting = state.waiting else {
                state.answer = response
                return nil
            }
            state.waiting = nil
            return waiting
        }
        waiting?.resume(returning: response)
    }
}
