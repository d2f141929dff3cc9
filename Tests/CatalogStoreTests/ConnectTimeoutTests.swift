import Foundation
import Synchronization
import Testing

@testable import CatalogStore

/// A PostgreSQL server that accepts the connection and never answers (a stuck server, or a
/// proxy in front of a dead one) fails the connection after libpq's `connect_timeout`,
/// which defaults to ``PostgresConnection/defaultConnectTimeout`` when the URL does not
/// set it: without it, libpq waits for the answer for ever.
@Suite struct ConnectTimeoutTests {
    @Test func aServerThatNeverAnswersFailsTheConnection() throws {
        // A socket that listens (the kernel completes the handshake) and never accepts.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(bound == 0 && listen(listener, 8) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        let port = UInt16(bigEndian: address.sin_port)
        // Made on a thread of its own, and waited for a good while longer than the default.
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let result = Result { _ = try PostgresConnection(url: "postgresql://catalog:catalog@127.0.0.1:\(port)/catalog", settings: "") }
            outcome.withLock { $0 = result }
            done.signal()
        }.start()
        let ended = done.wait(timeout: .now() + .seconds(PostgresConnection.defaultConnectTimeout * 6)) == .success
        #expect(ended, "the connection attempt is still waiting")
        guard ended else { return }
        switch outcome.withLock({ $0 }) {
        case let .failure(error as SQLError):
            #expect(error.kind == .connection)
            #expect(error.message.contains("timeout"), "\(error.message)")
        default:
            Issue.record("connected to a server that never answered")
        }
    }
}
