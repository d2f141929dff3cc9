import TestSupport
import Testing

@testable import HTTPServer

/// A seeded, bounded randomized pass over the parser: valid requests split at random
/// points must parse identically; mutated requests must be rejected or parse, never crash
/// or hang; and every mutation known to be invalid must be rejected.
@Suite struct ParserFuzzTests {
    enum Outcome: Equatable {
        case parsed(method: HTTPMethod?, path: String, query: String?, fields: Int, framing: String, keepAlive: Bool)
        case needMore
        case rejected(status: Int)
    }

    /// Feeds `bytes` to a fresh parser in the given pieces.
    static func parse(_ bytes: [UInt8], splits: [Int] = []) -> Outcome {
        var parser = RequestHeadParser(limits: ParserLimits())
        var end = 0
        for cut in (splits + [bytes.count]).sorted() where cut >= end {
            end = cut
            let result = bytes[0..<end].withUnsafeBufferPointer { buffer in
                Result { () throws(HTTPError) in try parser.parse(buffer) }
            }
            switch result {
            case let .failure(error):
                return .rejected(status: error.status.code)
            case let .success(head?):
                return .parsed(
                    method: head.method, path: head.path, query: head.query, fields: head.headers.count,
                    framing: "\(head.framing)", keepAlive: head.keepAlive)
            case .success(nil):
                continue
            }
        }
        return .needMore
    }

    static func validRequest(_ random: inout SeededGenerator) -> String {
        let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
        let segments = ["v1", "games", "items", "a%20b", "x-y", "~t", "42"]
        var path = ""
        for _ in 0..<Int.random(in: 1...4, using: &random) { path += "/" + segments.randomElement(using: &random)! }
        if Bool.random(using: &random) { path += "?limit=\(Int.random(in: 1...100, using: &random))&q=a+b" }
        var head = "\(methods.randomElement(using: &random)!) \(path) HTTP/1.1\r\nHost: example.com:8080\r\n"
        for index in 0..<Int.random(in: 0...8, using: &random) {
            head += "X-Field-\(index):\(Bool.random(using: &random) ? " " : "")value \(index)\t\r\n"
        }
        switch Int.random(in: 0...2, using: &random) {
        case 0: head += "Content-Length: \(Int.random(in: 0...5000, using: &random))\r\n"
        case 1: head += "Transfer-Encoding: chunked\r\n"
        default: break
        }
        return head + "\r\n"
    }

    /// Mutations that always make a valid head invalid, and the status each must get.
    static let invalidMutations: [(String, @Sendable (String) -> String, Int)] = [
        ("obs-fold", { $0.replacingOccurrences(of: "\r\nHost:", with: "\r\n Host:") }, 400),
        ("bare LF", { $0.replacingOccurrences(of: "\r\nHost:", with: "\nHost:") }, 400),
        ("bare CR", { $0.replacingOccurrences(of: "Host: ", with: "Host: a\rb") }, 400),
        ("space before colon", { $0.replacingOccurrences(of: "Host:", with: "Host :") }, 400),
        ("no Host", { $0.replacingOccurrences(of: "Host: example.com:8080\r\n", with: "") }, 400),
        ("two Hosts", { $0.replacingOccurrences(of: "Host:", with: "Host: a\r\nHost:") }, 400),
        ("version", { $0.replacingOccurrences(of: "HTTP/1.1\r\n", with: "HTTP/3.0\r\n") }, 400),
        ("percent", { $0.replacingOccurrences(of: " HTTP/1.1", with: "%G1 HTTP/1.1") }, 400),
        ("CL and TE", { $0.replacingOccurrences(of: "Host:", with: "Content-Length: 1\r\nTransfer-Encoding: chunked\r\nHost:") }, 400),
        ("signed CL", { $0.replacingOccurrences(of: "Host:", with: "Content-Length: +1\r\nHost:") }, 400),
        ("NUL in value", { $0.replacingOccurrences(of: "Host: ", with: "Host: \u{0}") }, 400),
    ]

    @Test func randomSplitsParseIdentically() {
        var random = SeededGenerator(seed: 0xC0FFEE)
        for _ in 0..<2000 {
            let request = Array(Self.validRequest(&random).utf8)
            let whole = Self.parse(request)
            guard case .parsed = whole else {
                Issue.record("valid request rejected: \(String(decoding: request, as: UTF8.self).debugDescription) -> \(whole)")
                continue
            }
            let splits = (0..<Int.random(in: 1...6, using: &random)).map { _ in Int.random(in: 0..<request.count, using: &random) }
            #expect(Self.parse(request, splits: splits) == whole)
        }
    }

    @Test func knownInvalidMutationsAreAlwaysRejected() {
        var random = SeededGenerator(seed: 0xBADC0DE)
        for _ in 0..<300 {
            let request = Self.validRequest(&random)
            for (name, mutate, status) in Self.invalidMutations {
                let mutated = Array(mutate(request).utf8)
                let splits = [Int.random(in: 0..<mutated.count, using: &random)]
                let outcome = Self.parse(mutated, splits: splits)
                #expect(outcome == .rejected(status: status), "\(name): \(String(decoding: mutated, as: UTF8.self).debugDescription)")
            }
        }
    }

    @Test func randomByteMutationsNeverCrashOrHang() {
        var random = SeededGenerator(seed: 42)
        let interesting: [UInt8] = [0, 9, 10, 13, 32, 37, 58, 127, 128, 255, UInt8(ascii: "/"), UInt8(ascii: "?")]
        var rejected = 0
        for _ in 0..<5000 {
            var bytes = Array(Self.validRequest(&random).utf8)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let position = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0...2, using: &random) {
                case 0: bytes[position] = interesting.randomElement(using: &random)!
                case 1: bytes.insert(UInt8.random(in: 0...255, using: &random), at: position)
                default: bytes.remove(at: position)
                }
            }
            // Every outcome is acceptable except a crash; a complete head must be well-formed.
            let outcome = Self.parse(bytes, splits: [Int.random(in: 0..<bytes.count, using: &random)])
            if case .rejected = outcome { rejected += 1 }
            if case let .parsed(_, path, _, _, _, _) = outcome {
                #expect(path.hasPrefix("/"), "parsed path \(path.debugDescription)")
            }
        }
        #expect(rejected > 1000, "mutations should mostly be caught; only \(rejected) were")
    }

    @Test func randomGarbageOverASocketNeverKillsTheServer() async throws {
        let server = try TestServer()
        try await onThread {
            var random = SeededGenerator(seed: 7)
            for _ in 0..<200 {
                let client = try server.client()
                client.setReceiveTimeout(2)
                let garbage = (0..<Int.random(in: 1...600, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                try? client.send(garbage + [13, 10, 13, 10])
                if let response = try? client.readResponse() {
                    #expect((400...505).contains(response.status))
                }
            }
            let (response, _) = try exchange(server, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(response.status == 200)
        }
    }

    /// The response writer's eight-bytes-a-step check for control characters in field values
    /// agrees with a byte-by-byte one for every byte at every place of short values.
    @Test func controlCharactersAreFoundWordByWord() {
        var wrong: [String] = []
        for length in 1...20 {
            for place in 0..<length {
                for byte in 0...255 {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[place] = UInt8(byte)
                    let found = bytes.withUnsafeBufferPointer { ResponseWriter.hasControl($0) }
                    if found != (byte < 0x20 || byte == 0x7F) { wrong.append("byte \(byte) at \(place) of \(length)") }
                }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(10))")
    }
}
