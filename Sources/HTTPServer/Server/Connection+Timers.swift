import CLinux
import CTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Deadlines, draining and closing.
extension Connection {
    func setDeadline(_ milliseconds: Int64, _ action: TimeoutAction) {
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
