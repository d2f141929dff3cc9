import ArgumentParser
import CatalogService
import HTTPServer

@main
struct CatalogServer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog-server",
        abstract: "Serves the video catalog over HTTP/1.1.")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The TCP port to listen on (0 picks a free one).")
    var port = 8080

    @Option(help: "Event loop threads (default: one per core).")
    var loopThreads: Int?

    @Option(help: "Seconds a graceful shutdown waits for requests in flight.")
    var shutdownTimeout = 10.0

    func validate() throws {
        guard shutdownTimeout > 0, shutdownTimeout <= 3600 else { throw ValidationError("--shutdown-timeout must be between 0 and 3600 seconds.") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535.") }
        if let loopThreads, !(1...256).contains(loopThreads) { throw ValidationError("--loop-threads must be between 1 and 256.") }
    }

    func run() throws {
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        if let loopThreads { configuration.loopThreads = loopThreads }
        configuration.shutdownTimeout = .milliseconds(Int64(shutdownTimeout * 1000))
        let server = try CatalogApplication.makeServer(configuration: configuration)
        let bound = try server.start()
        print("catalog-server listening on http://\(host):\(bound)")
        server.runUntilSignal()
        print("catalog-server stopped")
    }
}
