import CatalogStore
import Foundation
import HTTPServer
import ServiceTestSupport
import TestSupport
import Testing

@testable import CatalogService

/// `GET /metrics`, parsed as the Prometheus text exposition format.
@Suite struct MetricsTests {
    struct Sample {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    /// Parses the exposition text, checking its grammar as it goes.
    static func parse(_ text: String) throws -> [Sample] {
        var samples: [Sample] = []
        var typed: [String: String] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# HELP ") { continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                #expect(parts.count == 4 && ["counter", "gauge", "histogram"].contains(String(parts[3])), "\(line)")
                typed[String(parts[2])] = String(parts[3])
                continue
            }
            let nameEnd = line.firstIndex { $0 == "{" || $0 == " " } ?? line.endIndex
            let name = String(line[..<nameEnd])
            #expect(name.range(of: "^[a-zA-Z_:][a-zA-Z0-9_:]*$", options: .regularExpression) != nil, "\(line)")
            let family = ["_bucket", "_sum", "_count"].reduce(name) { name, suffix in
                typed[name] == nil && name.hasSuffix(suffix) ? String(name.dropLast(suffix.count)) : name
            }
            #expect(typed[family] != nil, "a TYPE line precedes \(name)")
            var labels: [String: String] = [:]
            var rest = Substring(line[nameEnd...])
            if rest.first == "{" {
                // name="value" pairs; values may hold any character, with \\, \" and \n escaped.
                rest = rest.dropFirst()
                while rest.first != "}" {
                    let equals = try #require(rest.firstIndex(of: "="), "\(line)")
                    let key = String(rest[..<equals])
                    rest = rest[rest.index(after: equals)...]
                    #expect(rest.first == "\"", "\(line)")
                    rest = rest.dropFirst()
                    var value = ""
                    while let character = rest.first, character != "\"" {
                        if character == "\\" {
                            rest = rest.dropFirst()
                            value.append(rest.first == "n" ? "\n" : rest.first ?? "\\")
                        } else {
                            value.append(character)
                        }
                        rest = rest.dropFirst()
                    }
                    rest = rest.dropFirst()
                    labels[key] = value
                    if rest.first == "," { rest = rest.dropFirst() }
                    #expect(!rest.isEmpty, "\(line)")
                    if rest.isEmpty { break }
                }
                rest = rest.dropFirst()
            }
            let value = try #require(Double(rest.trimmingCharacters(in: .whitespaces)), "\(line)")
            samples.append(Sample(name: name, labels: labels, value: value))
        }
        return samples
    }

    @Test(arguments: TestEngine.all) func countsRequestsByRouteAndExposesEveryFamily(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog()
            for _ in 0..<3 { _ = try await catalog.client.get("/v1/games") }
            _ = try await catalog.client.get("/v1/games/not-an-id")
            _ = try await catalog.client.get("/nowhere")
            _ = try await catalog.client.send("POST", "/v1/games", json: ["name": "Qix", "imageName": "qix"])
            let response = try await catalog.client.get("/metrics")
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
            let samples = try Self.parse(response.text)
            func value(_ name: String, _ labels: [String: String]) -> Double? {
                samples.first { sample in sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value } }?.value
            }
            #expect(value("catalog_http_requests_total", ["route": "/v1/games", "method": "GET", "status": "200"]) == 3)
            #expect(value("catalog_http_requests_total", ["route": "/v1/games/{id}", "method": "GET", "status": "400"]) == 1)
            #expect(value("catalog_http_requests_total", ["route": "unmatched", "method": "GET", "status": "404"]) == 1)
            #expect(value("catalog_http_requests_total", ["route": "/v1/games", "method": "POST", "status": "201"]) == 1)
            #expect(value("catalog_http_request_duration_seconds_count", ["route": "/v1/games"]) == 4)
            #expect(value("catalog_http_request_duration_seconds_bucket", ["route": "/v1/games", "le": "+Inf"]) == 4)
            let buckets = samples.filter { $0.name == "catalog_http_request_duration_seconds_bucket" && $0.labels["route"] == "/v1/games" }.map(\.value)
            #expect(buckets == buckets.sorted(), "buckets are cumulative")
            #expect(value("catalog_db_write_duration_seconds_count", [:]) == 1)
            #expect((value("catalog_db_read_duration_seconds_count", [:]) ?? 0) >= 3)
            #expect(value("catalog_http_open_connections", [:]) ?? 0 >= 1)
            #expect(value("catalog_http_requests_in_flight", [:]) == 1, "only this one, rendered off the event loop")
            #expect(value("catalog_http_rejected_total", ["reason": "tooManyConnections"]) == 0)
            #expect(value("catalog_build_info", [:]) == 1)
        }
    }

    /// Issue 12, finding 1: 20,000 distinct method tokens once grew the metrics by 80 MB.
    @Test(arguments: TestEngine.all) func labelsStayBoundedWhateverMethodsClientsSend(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false)
            let port = try #require(catalog.client.baseURL.port)
            // Pipelined on one connection: unknown methods get 501 (or 405 on a known path).
            var head = ""
            for index in 0..<300 {
                let token = "X\(index)" + String(repeating: "Q", count: 200)
                head += "\(token) \(index.isMultiple(of: 2) ? "/v1/games" : "/nowhere") HTTP/1.1\r\nHost: x\r\n\r\n"
            }
            head += "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let answer = try await Loopback.exchange(port: port, Array(head.utf8))
            #expect(answer.contains("HTTP/1.1 200 OK"), "the connection survived to the last request")
            let text = try await catalog.client.get("/metrics").text
            #expect(!text.contains("QQQQ"), "no client token is a label")
            let samples = try Self.parse(text)
            let methods = Set(samples.compactMap { $0.labels["method"] })
            #expect(methods.isSubset(of: Set(HTTPMethod.allCases.map(\.rawValue) + ["OTHER", "-"])), "\(methods)")
            let other = samples.filter { $0.name == "catalog_http_requests_total" && $0.labels["method"] == "OTHER" }.map(\.value).reduce(0, +)
            #expect(other == 300)
            #expect(text.utf8.count < 64 * 1024)
        }
    }
}
