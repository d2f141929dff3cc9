import CLinux
import CTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One client connection: reads bytes, parses requests in order, runs their handlers and
/// writes responses, enforcing timeouts. Owned by a single event loop thread.
final class Connection {
    /// Where the connection is in the request/response cycle.
    enum Phase {
        /// Waiting for (the rest of) a request head.
        case head
        /// Reading the body of a request whose head is complete, with what its admission
        /// found (its route, and what ``Handler/admitting(_:)`` returned).
        case body(RequestHead, BodyAdmission)
        /// A deferred handler is working on the request; what arrives meanwhile (a
        /// pipelined request) is only read into the input, up to ``readChunk``, and a
        /// hang-up abandons the work.
        case awaiting(ResponseContext)
        /// A streaming route's handler took the body (``RequestBodySink``): it is read
        /// into the sink as it arrives, then the answer is awaited.
        case receiving(ResponseContext, any RequestBodySink)
        /// The response's body is a stream being sent (``ResponseStream``); reading is
        /// paused, and the connection closes when the stream ends.
        case streaming(ResponseStream)
        /// The final response is sent and our side is shut down; input is discarded until
        /// the client closes or the linger timeout ends.
        case lingering
    }

    /// What ``admitBody(_:)`` found for a request with a body: its route, resolved once for
    /// both the admission and the dispatch, and what the route allows.
    struct BodyAdmission {
        /// The largest body the route takes.
        var limit: Int
        /// The router's answer for the request's method and path.
        var resolution: Router.Resolution
        /// What the route's admission check returned (``Handler/admitting(_:)``).
        var admitted: (any AnyObject & Sendable)? = nil
        /// Whether the handler takes the body as it arrives (``RequestBodySink``).
        var streams = false
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
        /// The route's own deadline for its answer, if it has one (milliseconds).
        var timeout: Int64? = nil
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
    var reservedBodyClient = ""
    /// The largest body the request being read may have (its route's limit).
    var bodyLimit = 0
    unowned let loop: EventLoop
    /// Where the loop's list of open connections holds this one (its sweeps walk that list).
    var openSlot = -1
    let input = ByteBuffer(capacity: 8 * 1024)
    let output = ByteBuffer(capacity: 4 * 1024)
    var parser: RequestHeadParser
    var chunkedDecoder: ChunkedDecoder?
    /// The part of a chunked body decoded so far.
    var pendingChunkedBody: [UInt8] = []
    /// The body of the request a streaming route answers, while it is not read yet.
    var unreadBody: UnreadBody?
    /// A file being sent as a response's body (``HTTPResponse/file``).
    var sendingFile: FileTransfer?
    /// Whether requests already read wait for a file to be sent.
    var requestsWaitForFile = false
    /// Whether requests already read wait for the output to drain below ``outputHighWater``
    /// (set when ``process()`` last stopped there).
    var requestsWaitForOutput = false
    var phase = Phase.head
    var requestStarted = false
    var closeAfterFlush = false
    /// Close without draining the client's input once the last response is out.
    var abortAfterFlush = false
    var peerClosedInput = false
    var isClosed = false
    /// As the event loop registers a new connection.
    var registeredEvents = Epoll.readable | Epoll.peerClosed
    /// The phase's deadline and the write's (``ConnectionDeadlines``).
    var deadlines: ConnectionDeadlines
    var requestSequence: UInt64 = 0
    /// The ticket of the request a deferred handler is answering.
    var ticket: RequestTicket?
    /// Bytes of the body budget this connection holds for a body still arriving.
    var reservedBodyBytes = 0
    /// The connection's TLS session on a TLS listener (`nil` for plaintext, and after a
    /// plaintext request arrived instead of a handshake, to answer it in plaintext).
    var tls: TLSSession?
    /// A TLS read (or the handshake) waits for writability, or a TLS write for readability.
    var tlsReadWantsWritable = false
    var tlsWriteWantsReadable = false
    /// Whether the loop will call ``onReadable()`` for input OpenSSL holds (see ``EventLoop/readSoon(_:)``).
    var readScheduled = false
    /// Whether a streamed body is sent in chunks (HTTP/1.1) or as it is (HTTP/1.0).
    var streamChunked = true
    /// Bytes of the stream in the output buffer, not yet counted as written.
    var streamQueued = 0

    /// Above this many unsent bytes the connection stops taking new requests until the
    /// client reads (pipelining without reading cannot grow memory without bound).
    static let outputHighWater = 256 * 1024
    static let readChunk = 16 * 1024
    /// The kernel's send buffer for an event stream (SO_SNDBUF; Linux doubles it).
    static let streamSendBuffer: Int32 = 64 * 1024
    static let maxReadPerEvent = 256 * 1024
    /// The most of a file one `sendfile` (or one read for TLS) moves.
    static let filePiece = 256 * 1024
    /// The most of a file read into the output buffer at once for TLS.
    static let tlsFilePiece = 64 * 1024
    /// The most of a file one connection sends before the loop turns to the others.
    static let maxFilePerTurn = 1 << 20

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
        parser = RequestHeadParser(limits: loop.core.parserLimits)
        deadlines = ConnectionDeadlines(loop.core.timeouts, openedAt: loop.now)
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
    func didReceive() {
        switch phase {
        case .lingering:
            input.clear()
            return
        case .head where !requestStarted:
            requestStarted = true
            // The first head's time started with the connection: it includes the handshake.
            deadlines = deadlines.headBegan(at: loop.now, continuesFirst: tls != nil && requestSequence == 0)
        default:
            break
        }
        process()
    }

    /// Whether more input is useful now (not after a decision to close, or while the
    /// client is not reading its responses). While a handler runs (plain connections, no
    /// body waiting for its handler), up to ``readChunk`` is read ahead: the interest set
    /// then stays as it was for the request's head, and an answer made off the loop costs
    /// no `epoll_ctl` before or after.
    var wantsInput: Bool {
        switch phase {
        case .awaiting: tls == nil && unreadBody == nil && !closeAfterFlush && input.readableCount < Self.readChunk
        case .streaming: false
        case .lingering: true
        case .receiving: unreadBody?.paused != true && !closeAfterFlush && output.readableCount <= Self.outputHighWater
        case .head, .body: !closeAfterFlush && output.readableCount <= Self.outputHighWater && sendingFile == nil
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

    /// How many times a turn the requests waiting for the output go on (each until the
    /// output passes ``outputHighWater`` again).
    static let resumesPerTurn = 4

    /// Whether requests waiting for the output may go on: it has drained below ``outputHighWater``.
    var resumesRequests: Bool { requestsWaitForOutput && output.readableCount <= Self.outputHighWater }

    /// Flushes output, applies end-of-input rules and updates the epoll interest set.
    func finishTurn() {
        guard !isClosed else { return }
        flush()
        guard !isClosed else { return }
        // The file is out, or the answers before them drained (in this flush, with no more
        // input to come): the requests pipelined behind go on, a bounded number of times a
        // turn; then the loop's other connections have theirs (``updateInterest()`` brings
        // this one back).
        var resumed = 0
        while requestsWaitForFile && sendingFile == nil || resumesRequests && resumed < Self.resumesPerTurn {
            requestsWaitForFile = false
            resumed += 1
            process()
            flush()
            guard !isClosed else { return }
        }
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
            case .head where requestsWaitForOutput:
                // Whole requests it sent before closing wait for it to read the answers before them.
                break
            default:
                // The client closed mid-request or between requests: nothing more can come.
                close()
                return
            }
        }
        updateInterest()
    }

    func updateInterest() {
        var desired: UInt32 = 0
        if let tls, !tls.isEstablished {
            desired = tlsReadWantsWritable ? Epoll.writable : Epoll.readable
        } else {
            if !peerClosedInput {
                if wantsInput || tlsWriteWantsReadable { desired |= Epoll.readable }
                // While a handler works, a hang-up must be seen (it abandons the work), read or
                // not. While a head or body is read, with reading (EPOLLIN then reports a
                // hang-up too, and an unread RDHUP would wake the loop for ever): the same set
                // as while a handler works, so that no `epoll_ctl` comes between.
                switch phase {
                case .awaiting, .streaming: desired |= Epoll.peerClosed
                case .head where desired & Epoll.readable != 0, .body where desired & Epoll.readable != 0: desired |= Epoll.peerClosed
                case .receiving where unreadBody?.paused == true: desired |= Epoll.peerClosed
                default: break
                }
            }
            if (!output.isEmpty || sendingFile != nil || resumesRequests) && !tlsWriteWantsReadable || tlsReadWantsWritable { desired |= Epoll.writable }
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
}
