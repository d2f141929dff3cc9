import CLinux
import CTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Deadlines, draining and closing.
extension Connection {
    /// Does what is due at `now` (``ConnectionDeadlines/due(at:)``).
    func checkDeadlines(now: Int64) {
        switch deadlines.due(at: now) {
        case nil:
            return
        case .writeStalled, .expired(.close):
            close()
        case let .expired(.fail(late)):
            // A streamed body too slow: its sink ends first, keeping what arrived.
            if case .receiving = phase, abandonAwaited() { loop.core.abandonedRequests.add(1, ordering: .relaxed) }
            failConnection(late.error, path: nil)
            finishTurn()
        case .expired(.expire):
            // An answer overdue, or a paused body whose sink never caught up.
            let context: ResponseContext
            switch phase {
            case let .awaiting(awaited), let .receiving(awaited, _): context = awaited
            default: return
            }
            guard abandonAwaited() else { return }
            loop.core.expiredRequests.add(1, ordering: .relaxed)
            write(loop.core.render(HTTPError.requestExpired, path: context.path, requestID: context.requestID), context)
            closeAfterFlush = true
            deadlines = deadlines.clearingPhase()
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
