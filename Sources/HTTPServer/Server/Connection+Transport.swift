import CLinux
import CTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Moving bytes: plain reads and writes, or through TLS, and its handshake.
extension Connection {
    /// What one read or write achieved.
    enum Transfer {
        case bytes(Int)
        case wouldBlock
        /// The peer closed its sending side (reads only).
        case end
        case failed
    }

    /// Reads from the socket, through TLS when the connection has it (but not while
    /// lingering: then the bytes are only discarded).
    func receive(into space: UnsafeMutableBufferPointer<UInt8>) -> Transfer {
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
    func transmit(_ bytes: UnsafeBufferPointer<UInt8>) -> Transfer {
        if let tls { return transfer(tls.write(bytes), writing: true) }
        while true {
            let count = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if let transfer = Self.sent(count) { return transfer }
        }
    }

    /// Writes the output buffer's pieces (its bytes and the arrays spliced between them)
    /// to the socket in one gathered write. Plain connections only: through TLS nothing is spliced.
    func transmitGathered() -> Transfer {
        output.withVectors { vectors in
            var message = msghdr()
            message.msg_iov = UnsafeMutablePointer(mutating: vectors.baseAddress)
            message.msg_iovlen = vectors.count
            while true {
                let count = sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
                if let transfer = Self.sent(count) { return transfer }
            }
        }
    }

    /// A send's outcome from what it returned; `nil` when interrupted (send again).
    private static func sent(_ count: Int) -> Transfer? {
        if count > 0 { return .bytes(count) }
        if count < 0 && errno == EINTR { return nil }
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? .wouldBlock : .failed
    }

    /// Sends the next piece of `file`: by `sendfile`, from the page cache to the socket,
    /// or, through TLS, read into the output buffer (which the caller then writes).
    func sendFile(_ file: inout FileTransfer) -> Transfer {
        let piece = min(file.remaining, tls == nil ? Self.filePiece : Self.tlsFilePiece)
        var count: Int
        if tls != nil {
            output.reserveWritable(piece)
            let space = output.writableSpace
            repeat {
                count = pread(file.file.descriptor, space.baseAddress, min(piece, space.count), off_t(file.next))
            } while count < 0 && errno == EINTR
            if count > 0 { output.didWrite(count) }
        } else {
            var offset = off_t(file.next)
            repeat {
                count = Glibc.sendfile(fd, file.file.descriptor, &offset, piece)
            } while count < 0 && errno == EINTR
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
        }
        // A file shorter than it was when opened cannot fill the length already sent.
        guard count > 0 else { return .failed }
        file.next += count
        file.remaining -= count
        return .bytes(count)
    }

    /// A TLS outcome as a transfer, noting when a read waits for writability or a write for readability.
    func transfer(_ outcome: TLSSession.Outcome, writing: Bool) -> Transfer {
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
    func advanceHandshake(_ tls: TLSSession) -> Bool {
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
}
