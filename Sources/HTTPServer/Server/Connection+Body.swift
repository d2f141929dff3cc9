#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Streamed request bodies (``Handler/streamingBody()``): taking a body into its sink
/// once the handler asks for it, and interim responses sent while it arrives.
extension Connection {
    /// The handler of request `sequence` took its body into `sink`: the body is read from
    /// now on, each read handed over as it arrives. A request without a body ends the
    /// sink's body at once, complete; one no longer awaited (answered, timed out, closed),
    /// incomplete.
    func beginReceiving(sequence: UInt64, into sink: any RequestBodySink) {
        guard !isClosed, case let .awaiting(context) = phase, context.sequence == sequence else { return sink.end(complete: false) }
        guard let unread = unreadBody else { return sink.end(complete: true) }  // it had none
        phase = .receiving(context, sink)
        bodyLimit = unread.limit
        // Its deadline is an idle bound, restarted by every read that brings some of it.
        deadlines = deadlines.bodyBegan(at: loop.now)
        if unread.expectsContinue, input.isEmpty { output.append(ResponseWriter.continueLine) }
        process()
        finishTurn()
    }

    /// Hands what has arrived of the body to `sink`.
    /// - Returns: whether the connection goes on processing (the body ended, or the sink
    ///   refused the rest); false while more of the body is awaited.
    func receiveBody(into sink: any RequestBodySink) -> Bool {
        guard case let .receiving(context, _) = phase, var unread = unreadBody, !unread.paused else { return false }
        guard !input.isEmpty else { return false }
        var intake = BodyIntake.taken
        var ended = false
        if let remaining = unread.remaining {
            let count = min(remaining, input.readableCount)
            intake = sink.receive(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: input.readable[0..<count])))
            input.moveReader(by: count)
            unread.remaining = remaining - count
            ended = remaining == count
        } else if var decoder = unread.decoder {
            do {
                var decoded: [UInt8] = []
                let (consumed, done) = try decoder.decode(input.readable, into: &decoded)
                input.moveReader(by: consumed)
                unread.decoder = decoder
                // The decoder checks each chunk against the limit; the whole body is counted here.
                unread.decoded += decoded.count
                guard unread.decoded <= bodyLimit else { throw HTTPError.contentTooLarge(limit: bodyLimit) }
                if !decoded.isEmpty { intake = decoded.withUnsafeBytes(sink.receive) }
                ended = done
            } catch {
                // The sink keeps what came before the malformed (or excessive) chunk.
                if abandonAwaited() { loop.core.abandonedRequests.add(1, ordering: .relaxed) }
                failConnection(error, path: context.path)
                return false
            }
        }
        let refused = intake == .refused
        deadlines = deadlines.bodyBegan(at: loop.now)
        guard ended || refused else {
            if intake == .paused {
                // The sink catches up first; waiting for it is not the client's slowness,
                // but a sink that never does is bounded like an answer (503).
                unread.paused = true
                deadlines = deadlines.awaitingAnswer(at: loop.now, timeout: context.timeout)
            }
            unreadBody = unread
            return false
        }
        unreadBody = ended ? nil : unread
        phase = .awaiting(context)
        deadlines = deadlines.awaitingAnswer(at: loop.now, timeout: context.timeout)
        if ended, !refused { sink.end(complete: true) }
        return true
    }

    /// The sink of request `sequence` caught up: reading its body goes on.
    func resumeReceiving(sequence: UInt64) {
        guard !isClosed, case let .receiving(context, _) = phase, context.sequence == sequence, unreadBody?.paused == true else { return }
        unreadBody?.paused = false
        deadlines = deadlines.bodyBegan(at: loop.now)
        process()
        finishTurn()
    }

    /// Reads what the socket still holds into the input buffer, up to
    /// ``maxHeldUnreadBody`` bytes (the rest is lost with the connection).
    func readRemainingInput() {
        while input.readableCount < Self.maxHeldUnreadBody {
            input.reserveWritable(Self.readChunk)
            let space = input.writableSpace
            guard case let .bytes(count) = receive(into: UnsafeMutableBufferPointer(rebasing: space[0..<min(space.count, Self.readChunk)])) else { return }
            input.didWrite(count)
        }
    }

    /// The most of a cut-off streamed body held for a handler that has not taken it yet.
    static let maxHeldUnreadBody = 4 << 20

    /// Skips the body of the request being answered that its streaming route did not
    /// read, when all of it has arrived. - Returns: false when it has not (the connection
    /// must then close after the answer: the next request's start is unknown).
    func skipUnreadBody() -> Bool {
        guard let unread = unreadBody else { return true }
        unreadBody = nil
        guard let remaining = unread.remaining, input.readableCount >= remaining else { return false }
        input.moveReader(by: remaining)
        return true
    }

    /// Queues the interim response `status` for request `sequence`, while it is still
    /// awaited (HTTP/1.1 only: an HTTP/1.0 client knows no interim responses).
    func sendInterim(_ status: HTTPStatus, headers: [(name: String, value: String)], sequence: UInt64) {
        let context: ResponseContext
        switch phase {
        case let .awaiting(awaited), let .receiving(awaited, _): context = awaited
        default: return
        }
        guard !isClosed, context.sequence == sequence, context.version == .http1_1, (100..<200).contains(status.code) else { return }
        ResponseWriter.writeInterim(status, headers: headers, into: output)
        finishTurn()
    }
}
