import Foundation
import TestSupport
import Testing

@testable import HTTPServer

/// A server quiet for a while (a second here: no event, no job, no request in flight)
/// hands the memory malloc holds freed back to the kernel, once a quiet spell: never
/// while a request is in flight, however long it waits, and not again until it has been
/// busy since (and five seconds have passed). A server configured not to never does.
@Suite struct IdleMemoryTests {
    @Test func aQuietServerReturnsFreedMemoryOncePerQuietSpell() async throws {
        let server = try TestServer {
            $0.quietBeforeReturningMemory = .seconds(1)
            $0.keepAliveTimeout = .seconds(30)
        }
        let returns: @Sendable () -> Int = { server.server.core.freedMemoryReturns.load(ordering: .relaxed) }
        // Quiet since it started: returned once.
        for _ in 0..<100 where returns() == 0 { try await Task.sleep(for: .milliseconds(100)) }
        #expect(returns() == 1)
        let token = UUID().uuidString
        try await onThread {
            // A request in flight for seven seconds (past the quiet second and the five
            // between returns): nothing returned meanwhile.
            let client = try server.client()
            try client.send("GET /wait/\(token) HTTP/1.1\r\nHost: x\r\n\r\n")
            for _ in 0..<250 where TestServer.waiting.withLock({ $0[token] }) == nil { usleep(20_000) }
            usleep(7_000_000)
            #expect(returns() == 1)
            TestServer.waiting.withLock { $0[token] }?.respond(.text("done"))
            #expect(try client.readResponse().text == "done")
        }
        // Quiet again (the client's close was the last event): returned once more, and only
        // once however long it stays quiet.
        for _ in 0..<100 where returns() == 1 { try await Task.sleep(for: .milliseconds(100)) }
        #expect(returns() == 2)
        try await Task.sleep(for: .milliseconds(3_000))
        #expect(returns() == 2)
    }

    @Test func aServerConfiguredNotToKeepsItsFreedMemory() async throws {
        let server = try TestServer { $0.quietBeforeReturningMemory = nil }
        try await onThread {
            let client = try server.client()
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "hello")
        }
        try await Task.sleep(for: .milliseconds(1_500))
        #expect(server.server.core.freedMemoryReturns.load(ordering: .relaxed) == 0)
    }
}
