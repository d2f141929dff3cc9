import CatalogService
import Foundation
import HTTPServer
import ServiceTestSupport
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
import CatalogStore
#endif

/// Real nginx (Debian's `nginx-light`) in front of the server, as `deploy/nginx-replicas.conf`
/// puts it: clients behind it keep budgets and connection caps of their own.
/// Where Debian installs nginx.
private let nginxPath = "/usr/sbin/nginx"

@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: nginxPath)))
struct ProxyTests {
    /// nginx on a free loopback port, proxying to `upstream` as the shipped config does.
    final class Balancer: Sendable {
        let port: Int
        let directory: URL
        let process: ChildProcess

        init(upstream: Int) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-nginx-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            port = try Executables.freePort()
            let path = directory.path
            let configuration = """
                worker_processes 1;
                daemon off;
                pid \(path)/nginx.pid;
                error_log \(path)/error.log;
                events { worker_connections 512; }
                http {
                    access_log off;
                    client_body_temp_path \(path)/body;
                    proxy_temp_path \(path)/proxy;
                    upstream catalog { server 127.0.0.1:\(upstream); keepalive 32; }
                    server {
                        listen 127.0.0.1:\(port);
                        location / {
                            proxy_pass http://catalog;
                            proxy_http_version 1.1;
                            proxy_set_header Connection "";
                            proxy_set_header Host $host;
                            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                            proxy_read_timeout 60s;
                        }
                    }
                }
                """
            try configuration.write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: nginxPath)
            process.arguments = ["-c", "\(path)/nginx.conf", "-p", path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            for _ in 0..<100 {
                if let fd = try? Loopback.connect(port: port) {
                    close(fd)
                    return
                }
                usleep(50_000)
            }
            throw Loopback.Failure(description: "nginx did not start: \((try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? "")")
        }

        deinit {
            process.terminate()
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// A request sent from `source` through the balancer; its status line, once answered.
    final class Exchange: @unchecked Sendable {
        let fd: Int32

        init(port: Int, from source: String, path: String) throws {
            fd = try Loopback.connect(port: port, receiveTimeout: 20, source: source)
            let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        }

        deinit { close(fd) }

        /// The status code of the answer.
        func status() -> Int {
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while !received.contains(10) {
                let count = recv(fd, &chunk, chunk.count, 0)
                guard count > 0 else { break }
                received += chunk[0..<count]
            }
            let line = String(decoding: received.prefix { $0 != 13 }, as: UTF8.self)
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        }
    }

    @Test(arguments: TestEngine.all) func clientsBehindTheBalancerKeepTheirOwnBudgetsAndCaps(_ engine: DatabaseEngine) async throws {
        try await TestEngine.run(engine) {
            let catalog = try TestCatalog(seed: false) {
                $0.server.trustedProxies = TrustedProxies([IPNetwork("127.0.0.1")!])
                $0.server.maxConnectionsPerAddress = 2
                $0.rateLimits = [
                    .read: RatePolicy(quota: 6, window: 600), .write: RatePolicy(quota: 6, window: 600),
                    .expensive: RatePolicy(quota: 6, window: 600),
                ]
            }
            let upstream = try #require(catalog.client.baseURL.port)
            let balancer = try await onThread { try Balancer(upstream: upstream) }
            let port = balancer.port
            try await onThread {
                // Two long-polls of one client hold its two places; its third request is refused,
                // while another client behind the same balancer is served.
                let held = try (0..<2).map { _ in try Exchange(port: port, from: "127.0.0.2", path: "/v1/changes?wait=2") }
                usleep(300_000)
                #expect(try Exchange(port: port, from: "127.0.0.2", path: "/healthz").status() == 503)
                #expect(try Exchange(port: port, from: "127.0.0.3", path: "/healthz").status() == 200)
                #expect(held.map { $0.status() } == [200, 200])
                // One client spends its read budget; the other keeps its own.
                var statuses: [Int] = []
                for _ in 0..<6 { statuses.append(try Exchange(port: port, from: "127.0.0.2", path: "/v1/games").status()) }
                #expect(statuses == [200, 200, 200, 200, 429, 429], "two reads went to the long-polls")
                #expect(try Exchange(port: port, from: "127.0.0.3", path: "/v1/games").status() == 200)
            }
        }
    }
}
