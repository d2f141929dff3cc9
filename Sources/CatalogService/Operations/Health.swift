import HTTPServer

/// Operational endpoints.
enum Health {
    /// `GET /healthz`: the process is alive and serving.
    static let liveness = HTTPResponse.text("ok")
}
