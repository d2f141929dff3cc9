#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinux
import CTLS

/// One client connection: reads bytes, parses requests in order, runs their handlers and
/// writes responses, enforcing timeouts. Owned by a single event loop thread.
final class Connection {
    /// Where the connection is in the request/response cycle.
    private enum Phase {
        /// Waiting for (the rest of) a request head.
        case head
        /// Reading the body of a request whose head is complete, with what its admission
        /// check found (``Handler/admitting(_:)``).
        case body(RequestHead, admitted: (any AnyObject & Sendable)?)
        /// A deferred handler is working on the request; reading is paused.
        case awaiting(ResponseContext)
        /// The response's body is a stream being sent (``ResponseStream``); reading is
        /// paused, and the connection closes when the stream ends.
        case streaming(ResponseStream)
        /// The final response is sent and our side is shut down; input is discarded until
        /// the client closes or the linger timeout ends.
        case lingering
    }

    /// What writing a response needs to know about the request it answers.
    struct ResponseContext {
        /// Which request of the connection this is, so a late or repeated deferred
        /// answer can never be taken for the answer to a later request.
        var sequence: UInt64
        var requestID: String
        var method: String
        var route: String?
        var started: UInt64
        var path: String
        var omitBody: Bool
        var keepAlive: Bool
        var version: HTTPVersion
        /// The request's `Origin`, when the server answers cross-origin requests.
        var origin: String? = nil
        /// Whether the response is a CORS preflight's, which carries its fields already.
        var preflight = false
    }

    /// What happens when `deadline` passes.
    private enum TimeoutAction {
        case close
        case fail(HTTPError)
        /// A deferred answer is overdue: answer 503 for it and close.
        case expire
    }

    let fd: Int32
    let id: UInt64
    let peer: String
    /// The peer's IP address (`nil` for another family).
    let address: IPAddress?
    /// The client address this connection is counted under (see ``ServerCore/admit(_:)``):
    /// the peer's, or for a trusted proxy's connection the client its last request (or its
    /// PROXY header) named; `nil` while it names none.
    var client: String?
    /// Where the peer says whom it forwards for, when it is a trusted proxy.
    let proxySource: TrustedProxies.Source?
    /// The PROXY protocol header read so far, while one is awaited.
    var proxyHeader: [UInt8]?
    /// The client address of the request being read: what its limits and budgets apply to.
    var requestClient = ""
    /// The client address the body budget this connection holds is counted under.
    private var reservedBodyClient = ""
    unowned let loop: EventLoop
    let input = ByteBuffer(capacity: 8 * 1024)
    private let output = ByteBuffer(capacity: 4 * 1024)
    var parser: RequestHeadParser
    private var chunkedDecoder: ChunkedDecoder?
    /// The part of a chunked body decoded so far.
    private var pendingChunkedBody: [UInt8] = []
    private var phase = Phase.head
    private var requestStarted = false
    private var closeAfterFlush = false
    /// Close without draining the client's input once the last response is out.
    private var abortAfterFlush = false
    private var peerClosedInput = false
    private(set) var isClosed = false
    private var registeredEvents = Epoll.readable
    private var deadline: Int64 = 0
    private var deadlineAction = TimeoutAction.close
    private var writeDeadline: Int64 = 0
    private var requestSequence: UInt64 = 0
    /// The ticket of the request a deferred handler is answering.
    private var ticket: RequestTicket?
    /// Bytes of the body budget this connection holds for a body still arriving.
    private var reservedBodyBytes = 0
    /// The connection's TLS session on a TLS listener (`nil` for plaintext, and after a
    /// plaintext request arrived instead of a handshake, to answer it in plaintext).
    var tls: TLSSession?
    /// A TLS read (or the handshake) waits for writability, or a TLS write for readability.
    private var tlsReadWantsWritable = false
    private var tlsWriteWantsReadable = false
    /// Whether the loop will call ``onReadable()`` for input OpenSSL holds (see ``EventLoop/readSoon(_:)``).
    var readScheduled = false
    /// Whether a streamed body is sent in chunks (HTTP/1.1) or as it is (HTTP/1.0).
    private var streamChunked = true
    /// Bytes of the stream in the output buffer, not yet counted as written.
    private var streamQueued = 0

    /// Above this many unsent bytes the connection stops taking new requests until the
    /// client reads (pipelining without reading cannot grow memory without bound).
    private static let outputHighWater = 256 * 1024
    private static let readChunk = 16 * 1024
    /// The kernel's send buffer for an event stream (SO_SNDBUF; Linux doubles it).
    static let streamSendBuffer: Int32 = 64 * 1024
    private static let maxReadPerEvent = 256 * 1024

    init(fd: Int32, id: UInt64, peer: String, address: IPAddress?, client: String?, loop: EventLoop, tls: TLSSession?) {
        self.fd = fd
        self.id = id
        self.peer = peer
        self.address = address
        self.client = client
        let proxies = loop.core.configuration.trustedProxies
        proxySource = address.flatMap { proxies?.trusts($0) == true ? proxies?.source : nil }
        if proxySource == .proxyProtocol { proxyHeader = [] }
        self.loop = loop
        self.tls = tls
        parser = RequestHeadParser(limits: loop.core.configuration.limits)
        setDeadline(loop.core.headTimeout, .close)
    }

    // MARK: Events

    /// Reads a chunk at a time and parses after each, so the input buffer holds at most
    /// the current request plus one chunk, however much the client sends.
    func onReadable() {
        if tlsWriteWantsReadable {
            // A TLS write waited for this.
            tlsWriteWantsReadable = false
            flush()
            guard !isClosed else { return }
        }
        if proxyHeader != nil, !readProxyHeader() { return }
        if let tls, !tls.isEstablished, !advanceHandshake(tls) { return }
        // The event may predate a decision (in `onWritable`) to stop reading.
        guard wantsInput else {
            updateInterest()
            return
        }
        var received = 0
        reading: while received < Self.maxReadPerEvent, !isClosed, !peerClosedInput {
            input.reserveWritable(Self.readChunk)
            if input.capacity > loop.core.peakInputBuffer.load(ordering: .relaxed) {
                loop.core.peakInputBuffer.max(input.capacity, ordering: .relaxed)
            }
            let space = input.writableSpace
            switch receive(into: UnsafeMutableBufferPointer(rebasing: space[0..<min(space.count, Self.readChunk)])) {
            case .end:
                peerClosedInput = true
            case .wouldBlock:
                break reading
            case .failed:
                close()
                break reading
            case let .bytes(count):
                input.didWrite(count)
                received += count
                didReceive()
                // A short read emptied the socket; OpenSSL may still hold whole records.
                if count < Self.readChunk && tls?.hasBufferedInput != true || !wantsInput { break reading }
            }
        }
        if case .lingering = phase {
            if peerClosedInput { close() }
            return
        }
        finishTurn()
    }

    /// Applies the bytes just read: lingering discards them, otherwise timers move and
    /// requests are parsed.
    private func didReceive() {
        switch phase {
        case .lingering:
            input.clear()
            return
        case .head where !requestStarted:
            requestStarted = true
            if tls != nil, requestSequence == 0 {
                // The first head's time started with the connection: it includes the handshake.
                deadlineAction = .fail(.headTimeout)
            } else {
                setDeadline(loop.core.headTimeout, .fail(.headTimeout))
            }
        default:
            break
        }
        process()
    }

    /// Whether more input is useful now (not while a handler runs, after a decision to
    /// close, or while the client is not reading its responses).
    private var wantsInput: Bool {
        switch phase {
        case .awaiting, .streaming: false
        case .lingering: true
        case .head, .body: !closeAfterFlush && output.readableCount <= Self.outputHighWater
        }
    }

    func onWritable() {
        if tlsReadWantsWritable || tls?.isEstablished == false {
            // A TLS read or the handshake waited for this.
            tlsReadWantsWritable = false
            return onReadable()
        }
        flush()
        if !isClosed, case .head = phase { process() }
        finishTurn()
    }

    /// Flushes output, applies end-of-input rules and updates the epoll interest set.
    private func finishTurn() {
        guard !isClosed else { return }
        flush()
        guard !isClosed else { return }
        if peerClosedInput {
            switch phase {
            case .awaiting, .lingering:
                break
            case .streaming:
                // Nobody reads the stream any more.
                close()
                return
            case .head where !requestStarted && !output.isEmpty:
                closeAfterFlush = true
            default:
                // The client closed mid-request or between requests: nothing more can come.
                close()
                return
            }
        }
        updateInterest()
    }

    private func updateInterest() {
        var desired: UInt32 = 0
        if let tls, !tls.isEstablished {
            desired = tlsReadWantsWritable ? Epoll.writable : Epoll.readable
        } else {
            if !peerClosedInput {
                if wantsInput || tlsWriteWantsReadable { desired |= Epoll.readable }
                // Only while a handler works: then nothing reads, and a hang-up must still be seen
                // (at other times EPOLLIN reports it, and an unread RDHUP would wake the loop for ever).
                switch phase {
                case .awaiting, .streaming: desired |= Epoll.peerClosed
                default: break
                }
            }
            if !output.isEmpty && !tlsWriteWantsReadable || tlsReadWantsWritable { desired |= Epoll.writable }
        }
        if desired != registeredEvents {
            registeredEvents = desired
            loop.setInterest(self, desired)
        }
        // Records OpenSSL already read from the socket raise no epoll event: read them now.
        if let tls, !readScheduled, !peerClosedInput, wantsInput, tls.isEstablished, tls.hasBufferedInput {
            readScheduled = true
            loop.readSoon(self)
        }
    }

    // MARK: Transport

    /// What one read or write achieved.
    private enum Transfer {
        case bytes(Int)
        case wouldBlock
        /// The peer closed its sending side (reads only).
        case end
        case failed
    }

    /// Reads from the socket, through TLS when the connection has it (but not while
    /// lingering: then the bytes are only discarded).
    private func receive(into space: UnsafeMutableBufferPointer<UInt8>) -> Transfer {
        if let tls {
            if case .lingering = phase {} else { return transfer(tls.read(into: space), writing: false) }
        }
        while true {
            let count = read(fd, space.baseAddress, space.count)
            if count > 0 { return .bytes(count) }
            if count == 0 { return .end }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .failed
        }
    }

    /// Writes to the socket, through TLS when the connection has it.
    private func transmit(_ bytes: UnsafeBufferPointer<UInt8>) -> Transfer {
        if let tls { return transfer(tls.write(bytes), writing: true) }
        while true {
            let count = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if count > 0 { return .bytes(count) }
            if count < 0 && errno == EINTR { continue }
            return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? .wouldBlock : .failed
        }
    }

    /// A TLS outcome as a transfer, noting when a read waits for writability or a write for readability.
    private func transfer(_ outcome: TLSSession.Outcome, writing: Bool) -> Transfer {
        switch outcome {
        case let .progress(count): return .bytes(count)
        case .wantsRead:
            if writing { tlsWriteWantsReadable = true }
            return .wouldBlock
        case .wantsWrite:
            if !writing { tlsReadWantsWritable = true }
            return .wouldBlock
        case .closed: return writing ? .failed : .end
        case .failed: return .failed
        }
    }

    /// Drives the TLS handshake; true once it is complete. A client that sent plaintext
    /// HTTP is answered 400 in plaintext; any other failure closes the connection.
    private func advanceHandshake(_ tls: TLSSession) -> Bool {
        let outcome = tls.handshake()
        switch outcome {
        case .progress:
            return true
        case .wantsRead, .wantsWrite:
            tlsReadWantsWritable = outcome == .wantsWrite
            updateInterest()
        case .closed:
            close()
        case let .failed(reason):
            loop.core.failedHandshakes.add(1, ordering: .relaxed)
            guard reason == ctls_reason_http_request() else {
                close()
                return false
            }
            self.tls = nil
            failConnection(HTTPError.plainHTTPOnTLSPort, path: nil)
            finishTurn()
        }
        return false
    }

    // MARK: Parsing and dispatch

    private func process() {
        while !isClosed {
            switch phase {
            case .awaiting, .lingering, .streaming:
                return
            case .head:
                guard !closeAfterFlush, output.readableCount <= Self.outputHighWater, !input.isEmpty else { return }
                let parsed: (head: RequestHead, consumed: Int)?
                do {
                    parsed = try parser.parse(input.readable)
                } catch {
                    failConnection(error, path: nil)
                    return
                }
                guard let (head, consumed) = parsed else { return }
                parser.reset()
                input.moveReader(by: consumed)
                guard countRequestClient(head) else { return }
                if head.framing == .none {
                    dispatch(head, body: [])
                } else {
                    guard let (limit, admitted) = admitBody(head) else { continue }
                    if head.expectsContinue, input.isEmpty { output.append(ResponseWriter.continueLine) }
                    var limits = parser.limits
                    limits.maxBody = limit
                    chunkedDecoder = head.framing == .chunked ? ChunkedDecoder(limits: limits) : nil
                    phase = .body(head, admitted: admitted)
                    setDeadline(loop.core.bodyTimeout, .fail(.bodyTimeout))
                }
            case let .body(head, admitted):
                // The bytes of a body still arriving are held against the server-wide budget,
                // as they arrive: a client must send what it holds.
                var held = input.readableCount + pendingChunkedBody.count
                if case let .length(length) = head.framing { held = min(held, length) }
                if held > reservedBodyBytes {
                    if reservedBodyBytes == 0 { reservedBodyClient = requestClient }
                    guard loop.core.reserveBody(held - reservedBodyBytes, for: reservedBodyClient) else {
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
                dispatch(head, body: body, admitted: admitted)
            }
        }
    }

    /// Gives back the body budget this connection holds.
    private func releaseBody() {
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
        return ResponseContext(sequence: requestSequence, requestID: requestID, method: head.methodToken, route: route, started: Self.now(),
                               path: head.path, omitBody: head.method == .HEAD, keepAlive: head.keepAlive, version: head.version,
                               origin: loop.core.configuration.cors != nil ? head.headers["origin"] : nil)
    }

    /// The request `head` and `body` make, as handlers see it (`GET` for an unimplemented method).
    @inline(__always)
    func request(_ head: RequestHead, body: [UInt8], requestID: String = "", parameters: PathParameters = PathParameters(),
                 admitted: (any AnyObject & Sendable)? = nil) -> HTTPRequest {
        var request = HTTPRequest(
            method: head.method ?? .GET, path: head.path, query: head.query, version: head.version,
            headers: head.headers, body: body, remoteAddress: peer)
        request.requestID = requestID
        request.clientAddress = requestClient
        request.pathParameters = parameters
        request.admitted = admitted
        return request
    }

    private func dispatch(_ head: RequestHead, body: [UInt8], admitted: (any AnyObject & Sendable)? = nil) {
        let resolution: Router.Resolution
        do {
            guard let method = head.method else { throw unimplementedMethodError(path: head.path) }
            resolution = try loop.core.router.resolve(method: method, path: head.path)
        } catch {
            let context = responseContext(head)
            write(loop.core.render(error, path: head.path, requestID: context.requestID), context)
            return
        }
        switch resolution {
        case let .options(allow):
            var context = responseContext(head, route: "OPTIONS")
            var response = HTTPResponse(status: .noContent, headers: [("Allow", allow)])
            response.cacheControl = "no-store"
            if let cors = loop.core.configuration.cors, head.headers["access-control-request-method"] != nil {
                // A preflight: its CORS fields are its own, not those of an actual request.
                response.headers += cors.preflightFields(origin: context.origin, methods: allow)
                context.preflight = true
            }
            write(response, context)
        case let .handler(route, parameters):
            let context = responseContext(head, route: route.pattern.description)
            let request = request(head, body: body, requestID: context.requestID, parameters: parameters, admitted: admitted)
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
                    loop.core.inFlight.add(1, ordering: .relaxed)
                    let response: HTTPResponse?
                    let responder = responder()
                    do {
                        response = try handle(request, responder)
                    } catch {
                        loop.core.inFlight.subtract(1, ordering: .relaxed)
                        throw error
                    }
                    if let response {
                        loop.core.inFlight.subtract(1, ordering: .relaxed)
                        write(response, context)
                    } else {
                        awaitAnswer(context, timeout: route.handler.timeout)
                    }
                }
            } catch {
                write(loop.core.render(error, path: head.path, requestID: context.requestID), context)
            }
        }
    }

    /// A responder for the request being dispatched, with a new ticket.
    private func responder() -> Responder {
        let ticket = RequestTicket()
        self.ticket = ticket
        return Responder(loop: loop, fd: fd, connectionID: id, sequence: requestSequence, ticket: ticket)
    }

    /// Waits for a deferred answer, until the request deadline (the handler's own, if it has one).
    private func awaitAnswer(_ context: ResponseContext, timeout: Duration?) {
        phase = .awaiting(context)
        setDeadline(timeout?.milliseconds ?? loop.core.requestTimeout, .expire)
    }

    /// Marks the awaited request abandoned and forgets it; false when none is awaited.
    private func abandonAwaited() -> Bool {
        guard case .awaiting = phase else { return false }
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
        case .awaiting, .streaming:
            close()
            return true
        default:
            return false
        }
    }

    /// Monotonic nanoseconds.
    private static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// The client's `X-Request-Id`, when it is 1…128 characters of letters, digits and
    /// `-_.:` (anything else is replaced, so ids are safe to log and echo).
    private static func requestID(_ headers: HTTPHeaders) -> String? {
        guard let index = headers.firstIndex(of: "x-request-id") else { return nil }
        let value = headers.valueBytes(at: index)
        guard (1...128).contains(value.count), value.allSatisfy({ byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
        }) else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// A method token the server does not implement: 405 with `Allow` on a known path,
    /// 501 elsewhere.
    func unimplementedMethodError(path: String) -> HTTPError {
        guard case let .options(allow)? = try? loop.core.router.resolve(method: .OPTIONS, path: path) else { return .methodNotImplemented }
        return HTTPError(.methodNotAllowed, code: "methodNotAllowed", detail: "This method is not supported here; allowed: \(allow).",
                         headers: ["Allow": allow])
    }

    /// Receives the result of a deferred handler.
    func complete(sequence: UInt64, with result: Result<HTTPResponse, SendableError>) {
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

    // MARK: Writing

    func write(_ response: consuming HTTPResponse, _ context: ResponseContext) {
        if let cors = loop.core.configuration.cors, !context.preflight { response.headers += cors.fields(origin: context.origin) }
        var stream = response.stream
        // A HEAD of a stream is framed as its GET is (chunked, no length), without a body.
        let headOfStream = stream != nil && context.omitBody && !response.status.forbidsBody
        if let ended = stream, context.omitBody || loop.isDraining || response.status.forbidsBody {
            // Nothing will be streamed: a HEAD, a shutdown, a status without a body.
            ended.connectionClosed()
            stream = nil
        }
        let keepAlive = context.keepAlive && !loop.isDraining && !response.closesConnection && stream == nil
        ResponseWriter.write(response, into: output, omitBody: context.omitBody, keepAlive: keepAlive, version: context.version,
                             requestID: context.requestID, date: loop.date, fixedFields: loop.core.fixedFields, streaming: stream != nil || headOfStream)
        if let observer = loop.core.configuration.requestObserver {
            observer(CompletedRequest(
                method: context.method, path: context.path, route: context.route, status: response.status.code, bytes: response.body.count,
                durationMicroseconds: Int((Self.now() - context.started) / 1000), requestID: context.requestID, remoteAddress: peer))
        }
        if let stream { return startStreaming(stream, version: context.version) }
        if !keepAlive { closeAfterFlush = true }
        if proxySource == .xForwardedFor || proxySource == .forwarded, let client {
            // A proxy's pooled connection counts for a client only while it carries its request.
            loop.core.release(client)
            self.client = nil
        }
        phase = .head
        requestStarted = !input.isEmpty
        if requestStarted {
            setDeadline(loop.core.headTimeout, .fail(.headTimeout))
        } else {
            setDeadline(loop.core.keepAliveTimeout, .close)
        }
    }

    // MARK: Streams

    /// Sends `stream` as the body, from what was sent before it got here.
    private func startStreaming(_ stream: ResponseStream, version: HTTPVersion) {
        // A stream is slow, long-lived and may never be read: the kernel holds at most a
        // small send buffer of it (not the megabytes TCP would grow to for a client that
        // reads nothing), and a loop copies at most that much into it per write.
        try? Socket.setOption(fd, SOL_SOCKET, SO_SNDBUF, Self.streamSendBuffer)
        phase = .streaming(stream)
        streamChunked = version != .http1_0
        deadline = 0
        input.clear()
        let (pending, ended, finished) = stream.attach(ResponseStream.Target(loop: loop, fd: fd, id: id))
        for bytes in pending { appendChunk(bytes) }
        if ended { finished ? endStream() : close() }
    }

    private func appendChunk(_ bytes: [UInt8]) {
        if streamChunked {
            output.append(String(bytes.count, radix: 16))
            output.append(byte: ASCII.cr)
            output.append(byte: ASCII.lf)
            output.append(bytes)
            output.append(byte: ASCII.cr)
            output.append(byte: ASCII.lf)
        } else {
            output.append(bytes)
        }
        streamQueued += bytes.count
    }

    /// The stream's next chunk.
    func streamSend(_ bytes: [UInt8]) {
        // Nothing after the last chunk (a send queued before a shutdown ended the stream).
        guard !isClosed, !closeAfterFlush, case .streaming = phase else { return }
        appendChunk(bytes)
        finishTurn()
    }

    /// The stream ended cleanly.
    func streamFinish() {
        guard !isClosed, !closeAfterFlush, case .streaming = phase else { return }
        endStream()
        finishTurn()
    }

    /// Queues the last chunk and closes once it is out.
    private func endStream() {
        if streamChunked { output.append(Self.lastChunk) }
        closeAfterFlush = true
    }

    private static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// Counts the stream's bytes that left the output buffer as written.
    private func accountStreamOutput() {
        guard streamQueued > 0, case let .streaming(stream) = phase else { return }
        let left = min(streamQueued, output.readableCount)
        stream.written(streamQueued - left)
        streamQueued = left
    }

    /// Answers a request that cannot be parsed or framed, then closes: after such an
    /// error the position of the next request in the stream is unknown.
    func failConnection(_ error: any Error, path: String?) {
        let requestID = loop.makeRequestID()
        let context = ResponseContext(sequence: requestSequence, requestID: requestID, method: "-", route: nil, started: Self.now(),
                                      path: path ?? "-", omitBody: false, keepAlive: false, version: .http1_1)
        write(loop.core.render(error, path: path, requestID: requestID), context)
        closeAfterFlush = true
        // No further timeout response: the write deadline and lingering bound the rest.
        deadline = 0
    }

    private func flush() {
        while !output.isEmpty {
            switch transmit(output.readable) {
            case let .bytes(count):
                output.moveReader(by: count)
                writeDeadline = 0  // an idle bound: progress restarts it
            case .wouldBlock:
                if writeDeadline == 0 { writeDeadline = loop.now + loop.core.bodyTimeout }
                accountStreamOutput()
                return
            case .end, .failed:
                close()
                return
            }
        }
        writeDeadline = 0
        output.shrinkIfEmpty()
        accountStreamOutput()
        if closeAfterFlush {
            if case .awaiting = phase { return }
            if abortAfterFlush { return close() }
            startLingering()
        } else {
            closeIfIdleWhileDraining()
        }
    }

    /// Shuts down our sending side and discards input for a while, so the client reads
    /// the final response instead of a reset caused by unread data.
    private func startLingering() {
        if case .lingering = phase { return }
        guard !peerClosedInput else {
            close()
            return
        }
        tls?.sendCloseNotify()
        shutdown(fd, Int32(SHUT_WR))
        releaseBody()  // a refused body's bytes are not kept while its input is discarded
        phase = .lingering
        input.clear()
        input.shrinkIfEmpty()
        setDeadline(loop.core.lingerTimeout, .close)
    }

    // MARK: Timers and shutdown

    private func setDeadline(_ milliseconds: Int64, _ action: TimeoutAction) {
        deadline = loop.now + milliseconds
        deadlineAction = action
    }

    func checkDeadlines(now: Int64) {
        if writeDeadline > 0, now >= writeDeadline {
            close()
            return
        }
        guard deadline > 0, now >= deadline else { return }
        deadline = 0
        switch deadlineAction {
        case .close:
            close()
        case let .fail(error):
            failConnection(error, path: nil)
            finishTurn()
        case .expire:
            guard case let .awaiting(context) = phase, abandonAwaited() else { return }
            loop.core.expiredRequests.add(1, ordering: .relaxed)
            write(loop.core.render(HTTPError.requestExpired, path: context.path, requestID: context.requestID), context)
            closeAfterFlush = true
            deadline = 0
            finishTurn()
        }
    }

    /// During a graceful shutdown, closes the connection if it is between requests.
    func closeIfIdleWhileDraining() {
        if loop.isDraining, !isClosed, case let .streaming(stream) = phase, !closeAfterFlush {
            // A shutdown ends streams cleanly: their last chunk, then the close.
            stream.connectionClosed()
            endStream()
            finishTurn()
            return
        }
        guard loop.isDraining, !isClosed, case .head = phase, !requestStarted, input.isEmpty, output.isEmpty else { return }
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        if abandonAwaited() { loop.core.abandonedRequests.add(1, ordering: .relaxed) }
        if case let .streaming(stream) = phase { stream.connectionClosed() }
        releaseBody()
        tls?.sendCloseNotify()
        Glibc.close(fd)
        loop.forget(self)
    }
}
