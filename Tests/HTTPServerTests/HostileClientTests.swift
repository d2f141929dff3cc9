import Foundation
import TestSupport
import Testing

@testable import HTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// Limits that keep one client from taking what others need: connections per address,
/// the memory of bodies in transit, the time a request may wait, and work left behind by
/// clients that have gone.
@Suite struct HostileClientTests {
    @Test func oneAddressCannotTakeEveryConnection() async throws {
        let server = try TestServer { $0.maxConnectionsPerAddress = 2 }
        try await onThread {
            let first = try server.client(from: "127.0.0.5")
            let second = try server.client(from: "127.0.0.5")
            for client in [first, second] {
                try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try client.readResponse().status == 200)
            }
            let refused = try server.client(from: "127.0.0.5").readResponse()
            #expect(refused.status == 503)
            #expect(refused.problemCode == "tooManyConnections")
            #expect(refused.header("Retry-After") == "1")
            // Another address is served; and a closed connection frees its place.
            let other = try server.client(from: "127.0.0.6")
            try other.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try other.readResponse().status == 200)
            try first.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(try first.readResponse().status == 200)
            #expect(first.waitForClose())
            first.hangUp()
            usleep(100_000)
            let again = try server.client(from: "127.0.0.5")
            try again.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try again.readResponse().status == 200)
            #expect(server.server.refusedPerAddress == 1)
        }
    }

    @Test(arguments: Transport.allCases) func bodiesInTransitShareOneBudget(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.maxBufferedBodyBytes = 1000 }
        try await onThread {
            // A body is counted by the bytes that have arrived, not by what its head declares.
            let slow = try server.client()
            try slow.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n" + String(repeating: "s", count: 700))
            usleep(100_000)
            #expect(server.server.bufferedBodyBytes == 700)
            let declared = try server.client()
            try declared.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\nab")
            usleep(100_000)
            #expect(server.server.bufferedBodyBytes == 702, "a large declared length holds nothing it has not sent")
            // Bytes that would go over the budget are refused.
            let refused = try server.client()
            try refused.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n" + String(repeating: "r", count: 400))
            let answer = try refused.readResponse()
            #expect(answer.status == 503)
            #expect(answer.problemCode == "serverBusy")
            #expect(answer.header("Retry-After") == "1")
            try slow.send(String(repeating: "s", count: 100))
            #expect(try slow.readResponse().body.count == 800)
            declared.hangUp()
            usleep(100_000)
            #expect(server.server.bufferedBodyBytes == 0, "completed and abandoned bodies give their bytes back")
            // With room again, a body that arrives whole with its head is served.
            let whole = try server.client()
            try whole.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n" + String(repeating: "w", count: 900))
            #expect(try whole.readResponse().body.count == 900)
            #expect(server.server.bufferedBodyBytes == 0)
            #expect(server.server.refusedBodies == 1)
        }
    }

    @Test(arguments: Transport.allCases) func overdueRequestsGet503AndAreAbandoned(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.requestTimeout = .milliseconds(300) }
        let token = UUID().uuidString
        try await onThread {
            let client = try server.client()
            try client.send("GET /wait/\(token) HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 503)
            #expect(response.problemCode == "requestTimeout")
            #expect(response.header("Retry-After") == "1")
            #expect(client.waitForClose())
        }
        #expect(TestServer.waiting.withLock { $0[token]?.isAbandoned } == true)
        #expect(server.server.expiredRequests == 1)
        #expect(server.server.inFlightRequests == 0)
    }

    @Test(arguments: Transport.allCases) func aClientThatLeavesAbandonsItsRequest(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        let token = UUID().uuidString
        try await onThread {
            let client = try server.client()
            try client.send("GET /wait/\(token) HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(100_000)
            #expect(TestServer.waiting.withLock { $0[token]?.isAbandoned } == false)
            client.hangUp()
            for _ in 0..<50 where TestServer.waiting.withLock({ $0[token]?.isAbandoned }) != true { usleep(20_000) }
        }
        #expect(TestServer.waiting.withLock { $0[token]?.isAbandoned } == true, "noticed without reading (EPOLLRDHUP)")
        #expect(server.server.abandonedRequests == 1)
        #expect(server.server.inFlightRequests == 0)
    }

    @Test func aFullPoolRefusesAtOnce() {
        let pool = WorkPool(name: "test", threads: 1, queueLimit: 1)
        let gate = DispatchSemaphore(value: 0)
        #expect(pool.submit { gate.wait() })
        usleep(50_000)  // the thread has taken the first job
        #expect(pool.submit {}, "one job may wait")
        #expect(!pool.submit {}, "a second may not")
        #expect(pool.refused == 1)
        gate.signal()
    }
}
