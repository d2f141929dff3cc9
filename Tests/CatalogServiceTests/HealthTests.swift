import Foundation
import Testing
import CatalogService
import HTTPServer
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The assembled service, over a real socket with URLSession as the client.
@Suite struct HealthTests {
    @Test func healthzAnswersOk() async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.loopThreads = 1
        let server = try CatalogApplication.makeServer(configuration: configuration)
        let port = try server.start()
        defer { server.shutdown() }
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/healthz"))
        let (data, response) = try await URLSession.shared.data(from: url)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self) == "ok")
        #expect(http.value(forHTTPHeaderField: "Content-Type") == "text/plain; charset=utf-8")
    }
}
