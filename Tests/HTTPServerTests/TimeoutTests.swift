import Foundation
import TestSupport
import Testing

@testable import HTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// Head, body and keep-alive timeouts, and slow clients that must not starve others.
@Suite struct TimeoutTests {
    /// A loop with no connection sleeps until something happens: no sweeps, no wakes (a
    /// sweep walks the loop's own connections only, and only while it has some). With one
    /// connection open, it sweeps, and the sweep still closes the connection when idle.
    @Test func aLoopWithoutConnectionsSleepsAndOneWithAConnectionSweeps() async throws {
        let server = try TestServer(.plaintext) { $0.loopThreads = 2 }
        try await onThread {
            let before = server.server.loopRounds
            usleep(400_000)
            // Each loop woke once in between: for the second reading.
            #expect(zip(before, server.server.loopRounds).map { $1 - $0 } == [1, 1])
            let client = try server.client()
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            let open = server.server.loopRounds
            usleep(400_000)
            // Sweeps every 30 ms on the loop that holds the connection (its shortest timeout,
            // 300 ms, over ten); the keep-alive timeout (800 ms) has not passed yet.
            #expect(zip(open, server.server.loopRounds).map { $1 - $0 }.max() ?? 0 >= 5)
            #expect(client.waitForClose())
        }
    }

    @Test(arguments: Transport.allCases) func clientStallingMidHeadGets408WhileOthersAreServed(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.headTimeout = .milliseconds(600) }
        try await onThread {
            let slow = try server.client()
            try slow.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Partial: ")
            // Meanwhile another client is served, repeatedly.
            let other = try server.client()
            for _ in 0..<10 {
                try other.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try other.readResponse().status == 200)
            }
            let response = try slow.readResponse()
            #expect(response.status == 408)
            #expect(response.problemCode == "requestTimeout")
            #expect(slow.waitForClose())
        }
    }

    @Test(arguments: Transport.allCases) func tricklingHeadIsCutOffAtTheWholeHeadDeadline(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.headTimeout = .milliseconds(500) }
        let status = try await onThread { () -> Int in
            let client = try server.client()
            try client.send("GET /hello HTTP/1.1\r\n")
            // Each byte arrives well within any per-read timeout, but the head never completes.
            for _ in 0..<20 {
                usleep(100_000)
                guard (try? client.send("X")) != nil else { break }
            }
            return try client.readResponse().status
        }
        #expect(status == 408)
    }

    @Test(arguments: Transport.allCases) func tricklingBodyIsCutOffAtTheWholeBodyDeadline(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.bodyTimeout = .milliseconds(600) }
        let (status, elapsed) = try await onThread { () -> (Int, Double) in
            let client = try server.client()
            let start = Date()
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
            // A byte every 100 ms would restart an idle timer for ever; the deadline is a total.
            for _ in 0..<40 {
                usleep(100_000)
                guard (try? client.send("X")) != nil else { break }
            }
            return (try client.readResponse().status, Date().timeIntervalSince(start))
        }
        #expect(status == 408)
        #expect(elapsed < 4.5, "cut off at the body deadline, not after the whole trickle (\(elapsed) s)")
    }

    @Test(arguments: Transport.allCases) func stalledBodyGets408(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.bodyTimeout = .milliseconds(400) }
        let (response, closed) = try await onThread { () -> (RawResponse, Bool) in
            let client = try server.client()
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
            let response = try client.readResponse()
            return (response, client.waitForClose())
        }
        #expect(response.status == 408)
        #expect(closed)
    }

    @Test(arguments: Transport.allCases) func idleKeepAliveConnectionIsClosedSilently(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.keepAliveTimeout = .milliseconds(300) }
        try await onThread {
            let client = try server.client()
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            #expect(client.waitForClose(), "closed with no further bytes after the keep-alive timeout")
        }
    }

    @Test(arguments: Transport.allCases) func silentNewConnectionIsClosedAtHeadTimeout(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.headTimeout = .milliseconds(300) }
        let closed = try await onThread { try server.client().waitForClose() }
        #expect(closed)
    }

    @Test func thousandSlowClientsDoNotStopOthersBeingServed() async throws {
        try await onThread {
            let server = try TestServer { $0.headTimeout = .seconds(30) }
            let slowClients = try (0..<1000).map { try server.client(from: "127.0.1.\($0 % 10 + 1)") }
            // Slowloris: each sends part of a head, then a byte now and then, never finishing.
            for client in slowClients { try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n") }
            for round in 0..<3 {
                for client in slowClients { try client.send("X-\(round): y\r\n") }
                let healthy = try server.client()
                try healthy.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try healthy.readResponse().status == 200)
            }
            #expect(server.server.openConnections >= 1000)
        }
    }
}

/// Graceful shutdown: in-flight requests complete, idle connections close, the server returns.
@Suite(.serialized) struct ShutdownTests {
    @Test(arguments: Transport.allCases) func shutdownLetsAnInFlightRequestFinish(_ transport: Transport) async throws {
        let server = try TestServer(transport)
        try await onThread {
            let busy = try server.client()
            let idle = try server.client()
            try idle.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try idle.readResponse().status == 200)
            try busy.send("GET /slow/500 HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(100_000)
            let stopper = Thread { server.server.shutdown() }
            stopper.start()
            let response = try busy.readResponse()
            #expect(response.status == 200)
            #expect(response.text == "slow done")
            #expect(response.header("Connection") == "close")
            #expect(busy.waitForClose())
            #expect(idle.waitForClose())
            if transport == .tls { #expect(idle.end == .closeNotify, "the drain closes idle TLS connections with close_notify") }
            server.server.waitUntilStopped()
            #expect((try? RawClient(port: server.port)) == nil, "no longer accepting")
        }
    }

    @Test func sigtermDuringSlowRequestStillDeliversTheFullResponse() async throws {
        let server = try TestServer()
        try await onThread {
            let finished = Latch()
            let runner = Thread {
                server.server.runUntilSignal([SIGUSR2])
                finished.open()
            }
            runner.start()
            usleep(100_000)
            let client = try server.client()
            try client.send("GET /slow/400 HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(100_000)
            kill(getpid(), SIGUSR2)
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.text == "slow done")
            finished.wait()
            #expect(server.server.openConnections == 0)
        }
    }

    @Test(arguments: Transport.allCases) func shutdownClosesStragglersAtTheDeadline(_ transport: Transport) async throws {
        let server = try TestServer(transport) { $0.shutdownTimeout = .milliseconds(300) }
        try await onThread {
            let client = try server.client()
            try client.send("GET /slow/3000 HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(50_000)
            server.server.shutdown()
            #expect(client.waitForClose())
            #expect(server.server.openConnections == 0)
        }
    }
}
