import CLinux
import CTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Requests: parsing heads and bodies, dispatching each to its handler, and taking the
/// answers back in order.
extension Connection {
    func process() {
        requestsWaitForOutput = false
        while !isClosed {
            switch phase {
            case .awaiting, .lingering, .streaming:
                return
            case let .receiving(_, sink):
                guard receiveBody(into: sink) else { return }
            case .head:
                guard sendingFile == nil else {
                    // After the file: ``finishTurn()`` comes back here once it is out.
                    requestsWaitForFile = !input.isEmpty
                    return
                }
                guard !closeAfterFlush, !input.isEmpty else { return }
                guard output.readableCount <= Self.outputHighWater else {
                    // A client that pipelines faster than it reads: ``finishTurn()`` comes back once it has read.
                    requestsWaitForOutput = true
                    return
                }
                let head: RequestHead
                do {
                    guard let parsed = try parser.parse(input.readable) else { return }
                    head = parsed
                } catch {
                    failConnection(error, path: nil)
                    return
                }
                input.moveReader(by: parser.headLength)
                parser.reset()
                guard countRequestClient(head) else { return }
                if head.framing == .none {
                    dispatch(head, body: [])
                } else {
                    guard let admission = admitBody(head) else { continue }
                    var limits = parser.limits
                    limits.maxBody = admission.limit
                    let decoder = head.framing == .chunked ? ChunkedDecoder(limits: limits) : nil
                    if admission.streams {
                        // The handler sees the head now and takes the body when it wants it.
                        var remaining: Int?
                        if case let .length(length) = head.framing { remaining = length }
                        unreadBody = UnreadBody(remaining: remaining, decoder: decoder, expectsContinue: head.expectsContinue, limit: admission.limit)
                        dispatch(head, body: [], admission: admission)
                        continue
                    }
                    if head.expectsContinue, input.isEmpty { output.append(ResponseWriter.continueLine) }
                    bodyLimit = admission.limit
                    chunkedDecoder = decoder
                    phase = .body(head, admission)
                    deadlines = deadlines.bodyBegan(at: loop.now)
                }
            case let .body(head, admission):
                // The bytes of a body still arriving are held against the server-wide budget,
                // as they arrive: a client must send what it holds.
                var held = input.readableCount + pendingChunkedBody.count
                if case let .length(length) = head.framing { held = min(held, length) }
                if held > reservedBodyBytes {
                    if reservedBodyBytes == 0 { reservedBodyClient = requestClient }
                    guard loop.core.reserveBody(held - reservedBodyBytes, for: reservedBodyClient, limit: bodyLimit) else {
                        // Not drained: reading the refused body would cost what the limit saves.
                        failConnection(HTTPError.bodyBufferFull, path: head.path)
                        abortAfterFlush = true
                        return
                    }
                    reservedBodyBytes = held
                }
                var body: [UInt8] = []
                if case let .length(length) = head.framing {
                    guard input.readableCount >= length else { return }
                    body = Array(UnsafeBufferPointer(rebasing: input.readable[0..<length]))
                    input.moveReader(by: length)
                } else if var decoder = chunkedDecoder {
                    do {
                        var decoded = pendingChunkedBody
                        pendingChunkedBody = []
                        let (consumed, done) = try decoder.decode(input.readable, into: &decoded)
                        chunkedDecoder = decoder
                        input.moveReader(by: consumed)
                        guard done else {
                            pendingChunkedBody = decoded
                            return
                        }
                        body = decoded
                        chunkedDecoder = nil
                    } catch {
                        failConnection(error, path: head.path)
                        return
                    }
                }
                releaseBody()
                dispatch(head, body: body, admission: admission)
            }
        }
    }

    /// Gives back the body budget this connection holds.
    func releaseBody() {
        guard reservedBodyBytes > 0 else { return }
        loop.core.releaseBody(reservedBodyBytes, for: reservedBodyClient)
        reservedBodyBytes = 0
    }

    /// What writing the answer to `head` needs, for a new request of the connection
    /// (matching `route`, when known).
    @inline(__always)
    func responseContext(_ head: RequestHead, route: String? = nil) -> ResponseContext {
        requestSequence &+= 1
        let requestID = Self.requestID(head.headers) ?? loop.makeRequestID()
        return ResponseContext(
            sequence: requestSequence, requestID: requestID, method: head.methodToken, route: route, started: Self.now(),
            path: head.path, omitBody: head.method == .HEAD, keepAlive: head.keepAlive, version: head.version,
            origin: loop.core.configuration.cors != nil ? head.headers["origin"] : nil)
    }

    /// The request `head` and `body` make, as handlers see it (`GET` for an unimplemented method).
    @inline(__always)
    func request(
        _ head: RequestHead, body: [UInt8], requestID: String = "", parameters: PathParameters = PathParameters(),
        admitted: (any AnyObject & Sendable)? = nil
    ) -> HTTPRequest {
        var request = HTTPRequest(
            method: head.method ?? .GET, path: head.path, query: head.query, version: head.version,
            headers: head.headers, body: body, remoteAddress: peer)
        request.requestID = requestID
        request.clientAddress = requestClient
        request.pathParameters = parameters
        request.admitted = admitted
        return request
    }

    /// Runs the handler of `head`'s route with `body`; a request with a body brings the
    /// route its admission resolved.
    func dispatch(_ head: RequestHead, body: [UInt8], admission: BodyAdmission? = nil) {
        let resolution: Router.Resolution
        do {
            resolution = try admission?.resolution ?? route(head)
        } catch {
            let context = responseContext(head)
            write(loop.core.render(error, path: head.path, requestID: context.requestID), context)
            return
        }
        switch resolution {
        case let .options(allow, fields):
            var context = responseContext(head, route: "OPTIONS")
            var response = HTTPResponse(status: .noContent, headers: [("Allow", allow)] + fields)
            response.cacheControl = "no-store"
            if let cors = loop.core.configuration.cors, head.headers["access-control-request-method"] != nil {
                // A preflight: its CORS fields are its own, not those of an actual request.
                response.headers += cors.preflightFields(origin: context.origin, methods: allow)
                context.preflight = true
            }
            write(response, context)
        case let .handler(route, parameters):
            var context = responseContext(head, route: route.pattern.description)
            context.timeout = route.handler.timeout?.milliseconds
            let request = request(head, body: body, requestID: context.requestID, parameters: parameters, admitted: admission?.admitted)
            do {
                switch route.handler.kind {
                case let .inline(handle):
                    write(try handle(request), context)
                case let .deferred(handle):
                    loop.core.inFlight.add(1, ordering: .relaxed)
                    awaitAnswer(context, timeout: route.handler.timeout)
                    handle(request, responder())
                case let .either(handle):
                    // Counted in flight before it runs, as work it hands to another thread
                    // may look at the count. A later answer arrives through this loop's
                    // queue, so it cannot run before the phase below is set.
                    // The answer is bound straight from the call: an optional response kept
                    // in a local was destroyed through the runtime's generic witnesses.
                    loop.core.inFlight.add(1, ordering: .relaxed)
                    let responder = responder()
                    let answered: HTTPResponse
                    do {
                        guard let response = try handle(request, responder) else {
                            awaitAnswer(context, timeout: route.handler.timeout)
                            return
                        }
                        answered = response
                    } catch {
                        loop.core.inFlight.subtract(1, ordering: .relaxed)
                        throw error
                    }
                    loop.core.inFlight.subtract(1, ordering: .relaxed)
                    write(answered, context)
                }
            } catch {
                write(loop.core.render(error, path: head.path, requestID: context.requestID), context)
            }
        }
    }

    /// A responder for the request being dispatched, with a new ticket.
    func responder() -> Responder {
        let ticket = RequestTicket()
        self.ticket = ticket
        return Responder(loop: loop, fd: fd, connectionID: id, sequence: requestSequence, ticket: ticket)
    }

    /// Waits for a deferred answer, until the request deadline (the handler's own, if it has one).
    func awaitAnswer(_ context: ResponseContext, timeout: Duration?) {
        phase = .awaiting(context)
        deadlines = deadlines.awaitingAnswer(at: loop.now, timeout: timeout?.milliseconds)
    }

    /// Marks the awaited request abandoned and forgets it; false when none is awaited.
    func abandonAwaited() -> Bool {
        switch phase {
        case .awaiting:
            break
        case let .receiving(context, sink):
            // The body's end comes first: the sink keeps what arrived before the answer is dropped.
            unreadBody = nil
            phase = .awaiting(context)
            sink.end(complete: false)
        default:
            return false
        }
        loop.core.inFlight.subtract(1, ordering: .relaxed)
        ticket?.abandoned.store(true, ordering: .relaxed)
        ticket = nil
        return true
    }

    /// The client closed its side while a deferred handler works for it: nobody will
    /// read the answer, so the work is marked abandoned and the connection closed.
    /// - Returns: whether that happened (false when no answer is awaited).
    func abandonIfAwaiting() -> Bool {
        switch phase {
        case .awaiting where unreadBody != nil && !peerClosedInput:
            // The client ended a streamed body its handler has not taken yet (an upload cut
            // off): what it sent is read now, for the sink to keep when it comes.
            readRemainingInput()
            peerClosedInput = true
            updateInterest()
            return true
        case .awaiting, .streaming, .receiving:
            close()
            return true
        default:
            return false
        }
    }

    /// Monotonic nanoseconds.
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// The client's `X-Request-Id`, when it is 1…128 characters of letters, digits and
    /// `-_.:` (anything else is replaced, so ids are safe to log and echo).
    static func requestID(_ headers: HTTPHeaders) -> String? {
        guard let index = headers.firstIndex(of: "x-request-id") else { return nil }
        let value = headers.valueBytes(at: index)
        guard (1...128).contains(value.count),
            value.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
            })
        else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// A method token the server does not implement: 405 with `Allow` on a known path,
    /// 501 elsewhere.
    /// The router's answer for `head`'s method and path (a method the server does not
    /// implement is answered from its path alone).
    func route(_ head: RequestHead) throws(HTTPError) -> Router.Resolution {
        guard let method = head.method else { throw unimplementedMethodError(path: head.path) }
        return try loop.core.router.resolve(method: method, path: head.path)
    }

    func unimplementedMethodError(path: String) -> HTTPError {
        guard case let .options(allow, _)? = try? loop.core.router.resolve(method: .OPTIONS, path: path) else { return .methodNotImplemented }
        return HTTPError(
            .methodNotAllowed, code: "methodNotAllowed", detail: "This method is not supported here; allowed: \(allow).",
            headers: ["Allow": allow])
    }

    /// Receives the result of a deferred handler.
    func complete(sequence: UInt64, with result: Result<HTTPResponse, SendableError>) {
        // A sink may answer before its body ended: its body ends there, and what is unread is skipped.
        if case let .receiving(context, sink) = phase, context.sequence == sequence {
            phase = .awaiting(context)
            sink.end(complete: false)
        }
        guard case let .awaiting(context) = phase, context.sequence == sequence else { return }
        loop.core.inFlight.subtract(1, ordering: .relaxed)
        ticket = nil
        switch result {
        case let .success(response): write(response, context)
        case let .failure(failure): write(loop.core.render(failure.error, path: context.path, requestID: context.requestID), context)
        }
        process()
        finishTurn()
    }
}
