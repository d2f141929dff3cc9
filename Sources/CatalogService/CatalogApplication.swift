import HTTPServer

/// Builds the catalog's HTTP server: the one place that wires routes, handlers and
/// error mapping, used by both the executable and the tests.
public enum CatalogApplication {
    /// The routes the service serves.
    public static func makeRouter() -> Router {
        var router = Router()
        router.add(.GET, "/healthz", .inline { _ in HealthHandlers.liveness })
        return router
    }

    /// Creates (but does not start) the server for `configuration`.
    public static func makeServer(configuration: ServerConfiguration) throws -> HTTPServer {
        try HTTPServer(configuration: configuration, router: makeRouter())
    }
}

/// Operational endpoints.
enum HealthHandlers {
    /// `GET /healthz`: the process is alive and serving.
    static let liveness = HTTPResponse.text("ok")
}
