import CTLS

/// One connection's TLS state (an `SSL` object on the connection's socket), driven by
/// its event loop: every call is non-blocking and says which readiness it waits for.
final class TLSSession {
    private let ssl: OpaquePointer
    /// Whether the handshake has completed.
    private(set) var isEstablished = false
    /// Set after a fatal error: the session may not be used or shut down any more.
    private var hasFailed = false
    private var sentCloseNotify = false
    /// The last read waited for the socket: whatever OpenSSL holds is an incomplete record,
    /// which epoll will report the rest of.
    private var readBlocked = false

    /// What a call achieved.
    enum Outcome: Equatable {
        /// Bytes were moved (or, for a handshake, it completed).
        case progress(Int)
        /// Waits until the socket is readable.
        case wantsRead
        /// Waits until the socket is writable.
        case wantsWrite
        /// The peer closed (close_notify or end of stream).
        case closed
        /// A fatal error; `reason` is OpenSSL's reason code.
        case failed(reason: Int32)
    }

    init(_ ssl: OpaquePointer) {
        self.ssl = ssl
    }

    deinit { SSL_free(ssl) }

    /// Advances the handshake.
    func handshake() -> Outcome {
        // SSL_get_error reads this thread's error queue: it must hold nothing older.
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            isEstablished = true
            return .progress(0)
        }
        return outcome(of: result)
    }

    /// Decrypts up to `buffer.count` bytes into `buffer`.
    func read(into buffer: UnsafeMutableBufferPointer<UInt8>) -> Outcome {
        ERR_clear_error()
        var count = 0
        let result = SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count)
        let outcome = result == 1 ? .progress(count) : outcome(of: result)
        readBlocked = outcome == .wantsRead || outcome == .wantsWrite
        return outcome
    }

    /// Encrypts and sends from `bytes`: at least one record when it makes progress.
    /// After `wantsRead` or `wantsWrite`, the next call must pass the same bytes again
    /// (more may follow them; the buffer may have moved).
    func write(_ bytes: UnsafeBufferPointer<UInt8>) -> Outcome {
        ERR_clear_error()
        var count = 0
        let result = SSL_write_ex(ssl, bytes.baseAddress, bytes.count, &count)
        return result == 1 ? .progress(count) : outcome(of: result)
    }

    /// Whether decrypted or still encrypted bytes wait inside OpenSSL that a read can
    /// use now: the socket may have nothing more to read, so epoll would not say so. (Not
    /// after a read that waited: `SSL_has_pending` also counts an incomplete record, and
    /// reading again at once would spin until its rest arrives.)
    var hasBufferedInput: Bool { !readBlocked && SSL_has_pending(ssl) == 1 }

    /// Sends close_notify once, when the session is established and healthy; best
    /// effort (a full socket buffer loses it, as the connection is closing anyway).
    func sendCloseNotify() {
        guard isEstablished, !hasFailed, !sentCloseNotify else { return }
        sentCloseNotify = true
        if SSL_shutdown(ssl) < 0 { ERR_clear_error() }
    }

    private func outcome(of result: Int32) -> Outcome {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            return .wantsRead
        case SSL_ERROR_WANT_WRITE:
            return .wantsWrite
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            hasFailed = true
            return .failed(reason: TLSContext.takeError().reason)
        }
    }
}
