import Foundation
import TestSupport
import Testing

@testable import HTTPServer

/// A loop quiet for a while (two seconds here) hands the memory malloc holds freed back
/// to the kernel, once a quiet spell: not while requests keep coming, and not again until
/// it has been busy since. A server configured not to never does.
@Suite struct IdleMemoryTests {
    @Test func aQuietLoopReturnsFreedMemoryOncePerQuietSpell() async throws {
        let server = try TestServer { $0.quietBeforeReturningMemory = .seconds(2) }
        let returns = { server.server.core.freedMemoryReturns.load(ordering: .relaxed) }
        // Quiet since it started: returned once, two seconds after.
        for _ in 0..<100 where returns() == 0 { try await Task.sleep(for: .milliseconds(100)) }
        #expect(returns() == 1)
        // Busy for three seconds, a request every 100 ms on a keep-alive connection: nothing
        // returned meanwhile.
        try await onThread {
            let client = try server.client()
            for _ in 0..<30 {
                try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try client.readResponse().text == "hello")
                usleep(100_000)
            }
        }
        #expect(returns() == 1)
        // Quiet again: returned once more, and only once however long it stays quiet.
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
