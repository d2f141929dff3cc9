import Foundation
import TestSupport
import Testing

@testable import HTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// Bodies sent from their own arrays (``ByteBuffer/append(splicing:)``), gathered with
/// the bytes around them into one write: every byte leaves once, in order, however the
/// socket takes them.
@Suite struct SplicedOutputTests {
    /// What `buffer` would write next, in order: its gathered pieces joined.
    private static func pending(_ buffer: ByteBuffer) -> [UInt8] {
        buffer.withVectors { vectors in
            var bytes: [UInt8] = []
            for vector in vectors {
                guard let start = vector.iov_base else { continue }
                bytes += UnsafeRawBufferPointer(start: start, count: vector.iov_len)
            }
            return bytes
        }
    }

    /// Random appends, splices, partial reads and compactions against a plain array of
    /// what was queued: the buffer's gathered pieces are always exactly the array.
    @Test func aBufferWithSplicedArraysReadsBackExactlyWhatWasQueued() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let buffer = ByteBuffer(capacity: 64)
        var model: [UInt8] = []
        var counter: UInt8 = 0
        func made(_ count: Int) -> [UInt8] {
            (0..<count).map { _ in
                counter &+= 1
                return counter
            }
        }
        for step in 0..<4_000 {
            switch next(6) {
            case 0, 1:
                let bytes = made(next(40))
                buffer.append(bytes)
                model += bytes
            case 2:
                let bytes = made(1 + next(300))
                buffer.append(splicing: bytes)
                model += bytes
            case 3:
                // A compaction (the reader's bytes moved to the front) with arrays spliced:
                // more room than is left after the writer, no more than the reader frees.
                if buffer.readerIndex > 0 { buffer.reserveWritable(buffer.capacity - buffer.writerIndex + 1 + next(buffer.readerIndex)) }
            default:
                let count = next(model.count + 1)
                buffer.moveReader(by: count)
                model.removeFirst(count)
            }
            #expect(buffer.readableCount == model.count, "step \(step)")
            #expect(buffer.isEmpty == model.isEmpty, "step \(step)")
            // Up to ``maxSplicesPerWrite`` arrays a write: what it takes is what comes first.
            let pending = Self.pending(buffer)
            #expect(pending.count <= model.count && Array(model.prefix(pending.count)) == pending, "step \(step)")
            if model.count > 0 { #expect(!pending.isEmpty, "step \(step)") }
            // The contiguous bytes stop at the first splice, and begin the same.
            #expect(Array(buffer.readable) == Array(model.prefix(buffer.readable.count)), "step \(step)")
        }
        buffer.moveReader(by: model.count)
        #expect(buffer.isEmpty && buffer.readerIndex == 0 && buffer.writerIndex == 0)
    }

    @Test func aGatheredWriteTakesAtMostItsShareOfSplicedArrays() {
        let buffer = ByteBuffer(capacity: 16)
        let arrays = ByteBuffer.maxSplicesPerWrite + 3
        for index in 0..<arrays {
            buffer.append([UInt8(index)])
            buffer.append(splicing: [UInt8](repeating: UInt8(index), count: 2))
        }
        // Each array's head byte before it, the arrays up to the share, and the byte after the last one taken.
        #expect(buffer.withVectors { $0.count } == 2 * ByteBuffer.maxSplicesPerWrite + 1)
        #expect(Self.pending(buffer).count == 3 * ByteBuffer.maxSplicesPerWrite + 1)
        buffer.moveReader(by: 3 * ByteBuffer.maxSplicesPerWrite + 1)
        #expect(Self.pending(buffer) == [16, 16, 17, 17, 17, 18, 18, 18])
    }

    /// An array whose buffer is more than twice its bytes (a compressed copy made in a
    /// worst-case buffer) is copied, not held: the high-water mark counts bytes.
    @Test func anArrayHoldingMuchMoreRoomThanBytesIsCopied() {
        let buffer = ByteBuffer(capacity: 16)
        var roomy = [UInt8](repeating: 7, count: 2_000)
        roomy.reserveCapacity(100_000)
        buffer.append(splicing: roomy)
        #expect(buffer.readable.count == 2_000 && buffer.readableCount == 2_000)
        buffer.append(splicing: [UInt8](repeating: 8, count: 2_000))
        #expect(buffer.readable.count == 2_000 && buffer.readableCount == 4_000)
    }

    /// Pipelined answers of every size, small ones copied after their heads and large ones
    /// spliced, read only once the server's writes have filled the socket: each arrives
    /// whole and in order, over plaintext (gathered writes) and TLS (copied).
    @Test(arguments: Transport.allCases) func pipelinedLargeAndSmallAnswersArriveWholeAndInOrder(_ transport: Transport) async throws {
        // The output passes its high-water mark: the requests behind wait until the client
        // has read, then go on (they once waited for input that would never come, then 408).
        let server = try TestServer(transport)
        let sizes = [0, 5, 1_023, 1_024, 1_025, 70_000, 12, 300_000, 4_096, 1, 200_000, 65_536, 900, 2, 3_000]
        let expected = sizes.map(TestServer.bytes)
        try await onThread {
            let client = try server.client()
            try client.send(sizes.map { "GET /bytes/\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
            Thread.sleep(forTimeInterval: 0.1)
            for (size, bytes) in zip(sizes, expected) {
                let response = try client.readResponse()
                let (status, length, whole) = (response.status, response.header("Content-Length"), response.body == bytes)
                #expect(status == 200)
                #expect(length == "\(size)")
                #expect(whole, "\(size) bytes")
            }
            // The connection goes on after them.
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "hello")
        }
    }

    /// More spliced answers at once than one gathered write takes (20 of 2,000 bytes
    /// against ``ByteBuffer/maxSplicesPerWrite``): the rest go in the next write, in order.
    @Test func moreSplicedAnswersThanOneWriteTakesArriveInOrder() async throws {
        let server = try TestServer()
        let sizes = (0..<20).map { 2_000 + $0 }
        let expected = sizes.map(TestServer.bytes)
        try await onThread {
            let client = try server.client()
            try client.send(sizes.map { "GET /bytes/\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
            for (size, bytes) in zip(sizes, expected) {
                let whole = try client.readResponse().body == bytes
                #expect(whole, "\(size) bytes")
            }
        }
    }

    /// A client that pipelines, closes its sending side, then reads slowly: every whole
    /// request it sent is answered, however long the answers before it wait to be read.
    @Test func requestsSentBeforeAHalfCloseAreAllAnswered() async throws {
        let server = try TestServer()
        let sizes = [300_000, 200_000, 5, 300_000, 2_000, 1]
        let expected = sizes.map(TestServer.bytes)
        try await onThread {
            let client = try server.client()
            try client.send(sizes.map { "GET /bytes/\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
            shutdown(client.fd, Int32(SHUT_WR))
            Thread.sleep(forTimeInterval: 0.1)
            for (size, bytes) in zip(sizes, expected) {
                let whole = try client.readResponse().body == bytes
                #expect(whole, "\(size) bytes")
            }
            #expect(client.waitForClose())
        }
    }

    /// HEAD of a large answer: its length, no body, and the next answer right after it.
    @Test func headOfALargeAnswerSendsNoBody() async throws {
        let server = try TestServer()
        try await onThread {
            let client = try server.client()
            try client.send("HEAD /bytes/5000 HTTP/1.1\r\nHost: x\r\n\r\nGET /bytes/2000 HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.readResponse(head: true)
            #expect(head.header("Content-Length") == "5000")
            let whole = try client.readResponse().body == TestServer.bytes(2000)
            #expect(whole)
        }
    }
}
