import CLinux

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whom a connection's requests come from (the peer, or the client a trusted proxy names)
/// and what a request must pass before its body is read.
extension Connection {
    /// Counts the connection under the client `head` comes from: a trusted proxy's says
    /// whom it forwards for; anyone else's is its peer. False when that client is at its
    /// connection limit: then it is answered 503 and the connection closes.
    func countRequestClient(_ head: RequestHead) -> Bool {
        guard let proxySource, let address else {
            requestClient = client ?? "unknown"
            return true
        }
        let key: String
        switch proxySource {
        case .proxyProtocol:
            key = client ?? address.clientKey
        case .xForwardedFor, .forwarded:
            let fields = head.headers.values(for: proxySource == .forwarded ? "forwarded" : "x-forwarded-for")
            let proxies = loop.core.configuration.trustedProxies
            let forwarded =
                proxySource == .forwarded
                ? proxies?.forwardedClient(peer: address, forwarded: fields, xForwardedFor: [])
                : proxies?.forwardedClient(peer: address, forwarded: [], xForwardedFor: fields)
            // The proxy's own requests (a health check) count as the proxy's; fields that
            // name no client (malformed, `unknown`) share a key of their own, so they can
            // never take the proxy's places.
            key = forwarded?.clientKey ?? (fields.isEmpty ? address.clientKey : "unattributed via " + address.clientKey)
        }
        guard count(as: key) else {
            failConnection(HTTPError.tooManyFromAddress, path: head.path)
            return false
        }
        requestClient = key
        return true
    }

    /// Moves the connection's count to `key`; false (counted under nothing) when that
    /// client is at its connection limit.
    func count(as key: String) -> Bool {
        if client == key { return true }
        if let client { loop.core.release(client) }
        client = nil
        guard loop.core.admit(key) else {
            loop.core.refusedPerAddress.add(1, ordering: .relaxed)
            return false
        }
        client = key
        return true
    }

    /// Reads a PROXY protocol version 2 header, byte-exactly (what follows it is the HTTP
    /// or TLS stream), and counts the connection under the client it names (its peer for
    /// a `LOCAL` header, a proxy's own health check). True once read; false while more is
    /// awaited, and when the connection was closed (not such a header, or a client at its
    /// connection limit, which a plaintext listener first tells so).
    func readProxyHeader() -> Bool {
        guard var header = proxyHeader else { return true }
        while true {
            let needed: Int
            switch header.withUnsafeBytes(ProxyProtocol.parseV2) {
            case let .header(_, source):
                proxyHeader = nil
                guard count(as: source?.clientKey ?? address?.clientKey ?? "unknown") else {
                    if tls == nil { ResponseWriter.tooManyFromAddress.withUnsafeBytes { _ = send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
                    close()
                    return false
                }
                return true
            case .invalid:
                close()
                return false
            case .needMore:
                needed = header.count < 16 ? 16 : 16 + (Int(header[14]) << 8 | Int(header[15]))
            }
            var chunk = [UInt8](repeating: 0, count: needed - header.count)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                header += chunk.prefix(count)
                proxyHeader = header
            } else if count < 0, errno == EINTR {
                continue
            } else if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                return false
            } else {
                close()
                return false
            }
        }
    }

    /// The body limit of the route `head` names, when the request may send its body:
    /// within that limit and past the route's admission check (a credential checked from
    /// the head alone). Otherwise the refusal is answered, the body skipped when it has
    /// all arrived and the connection closed when not, and the result is `nil`.
    func admitBody(_ head: RequestHead) -> BodyAdmission? {
        do {
            // A method the server does not implement is answered from its head; no handler reads
            // a body for OPTIONS.
            var admission = BodyAdmission(limit: 0, resolution: try route(head))
            if case let .handler(route, _) = admission.resolution {
                let handler = route.handler
                if let admit = handler.admission { admission.admitted = try admit(request(head, body: [])) }
                admission.limit = handler.bodyLimit(server: loop.core.configuration.limits.maxBody)
                admission.streams = handler.streamsBody
            }
            if case let .length(length) = head.framing, length > admission.limit { throw HTTPError.contentTooLarge(limit: admission.limit) }
            return admission
        } catch {
            var context = responseContext(head)
            if case let .length(length) = head.framing, input.readableCount >= length {
                input.moveReader(by: length)  // all here: skipped, and the connection stays
            } else {
                context.keepAlive = false
            }
            write(loop.core.render(error, path: head.path, requestID: context.requestID), context)
            return nil
        }
    }
}
