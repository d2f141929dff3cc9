import CLinux
import CTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Responses and streams on their way out: writing them, chunked streams, flushing, and
/// closing with a linger.
extension Connection {
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
        var keepAlive = context.keepAlive && !loop.isDraining && !response.closesConnection && stream == nil
        if unreadBody != nil, !skipUnreadBody() { keepAlive = false }
        ResponseWriter.write(
            response, into: output, omitBody: context.omitBody, keepAlive: keepAlive, version: context.version,
            requestID: context.requestID, date: loop.date, fixedFields: loop.core.fixedFields, streaming: stream != nil || headOfStream,
            splicesBody: tls == nil)
        if let observer = loop.core.configuration.requestObserver {
            observer(
                CompletedRequest(
                    method: context.method, path: context.path, route: context.route, status: response.status.code, bytes: response.file?.count ?? response.body.count,
                    durationMicroseconds: Int((Self.now() - context.started) / 1000), requestID: context.requestID, remoteAddress: peer))
        }
        if let stream { return startStreaming(stream, version: context.version) }
        if let file = response.file, !context.omitBody, !response.status.forbidsBody, file.count > 0 { sendingFile = FileTransfer(file) }
        if !keepAlive { closeAfterFlush = true }
        if proxySource == .xForwardedFor || proxySource == .forwarded, let client {
            // A proxy's pooled connection counts for a client only while it carries its request.
            loop.core.release(client)
            self.client = nil
        }
        phase = .head
        requestStarted = !input.isEmpty
        deadlines = deadlines.responded(at: loop.now, nextBegan: requestStarted)
    }

    // MARK: Streams

    /// Sends `stream` as the body, from what was sent before it got here.
    func startStreaming(_ stream: ResponseStream, version: HTTPVersion) {
        // A stream is slow, long-lived and may never be read: the kernel holds at most a
        // small send buffer of it (not the megabytes TCP would grow to for a client that
        // reads nothing), and a loop copies at most that much into it per write.
        try? Socket.setOption(fd, SOL_SOCKET, SO_SNDBUF, Self.streamSendBuffer)
        phase = .streaming(stream)
        streamChunked = version != .http1_0
        deadlines = deadlines.clearingPhase()
        input.clear()
        let (pending, ended, finished) = stream.attach(ResponseStream.Target(loop: loop, fd: fd, id: id))
        for bytes in pending { appendChunk(bytes) }
        if ended { finished ? endStream() : close() }
    }

    func appendChunk(_ bytes: [UInt8]) {
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
    func endStream() {
        if streamChunked { output.append(Self.lastChunk) }
        closeAfterFlush = true
    }

    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// Counts the stream's bytes that left the output buffer as written.
    func accountStreamOutput() {
        guard streamQueued > 0, case let .streaming(stream) = phase else { return }
        let left = min(streamQueued, output.readableCount)
        stream.written(streamQueued - left)
        streamQueued = left
    }

    /// Answers a request that cannot be parsed or framed, then closes: after such an
    /// error the position of the next request in the stream is unknown.
    func failConnection(_ error: any Error, path: String?) {
        let requestID = loop.makeRequestID()
        let context = ResponseContext(
            sequence: requestSequence, requestID: requestID, method: "-", route: nil, started: Self.now(),
            path: path ?? "-", omitBody: false, keepAlive: false, version: .http1_1)
        write(loop.core.render(error, path: path, requestID: requestID), context)
        closeAfterFlush = true
        // No further timeout response: the write deadline and lingering bound the rest.
        deadlines = deadlines.clearingPhase()
    }

    func flush() {
        var fileBytes = 0
        while !output.isEmpty || sendingFile != nil {
            if output.isEmpty, var file = sendingFile {
                // A file's turn is bounded, so one large file never holds the loop: the rest
                // goes when the socket is writable again (level-triggered, after the others).
                guard fileBytes < Self.maxFilePerTurn else { break }
                let outcome = sendFile(&file)
                sendingFile = file.remaining > 0 ? file : nil
                switch outcome {
                case let .bytes(count):
                    fileBytes += count
                    deadlines = deadlines.wrote()
                    continue
                case .wouldBlock:
                    deadlines = deadlines.writeBlocked(at: loop.now)
                    return
                case .end, .failed:
                    close()
                    return
                }
            }
            switch output.holdsSplices ? transmitGathered() : transmit(output.readable) {
            case let .bytes(count):
                output.moveReader(by: count)
                deadlines = deadlines.wrote()  // an idle bound: progress restarts it
            case .wouldBlock:
                deadlines = deadlines.writeBlocked(at: loop.now)
                accountStreamOutput()
                return
            case .end, .failed:
                close()
                return
            }
        }
        guard sendingFile == nil else { return }
        deadlines = deadlines.wrote()
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
    func startLingering() {
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
        deadlines = deadlines.lingering(at: loop.now)
    }
}
