import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Logging

/// Everything the catalog service is configured with.
public struct CatalogConfiguration: Sendable {
    /// The HTTP server's settings.
    public var server = ServerConfiguration()
    /// The SQLite database file; its folder is created if missing.
    public var databasePath = "./data/catalog.sqlite"
    /// The folder of `NNNN_description.sql` migrations.
    public var migrationsDirectory = Migration.defaultDirectory()
    /// Whether to load the demo catalog into an empty database.
    public var seedDemoCatalog = true
    /// The OpenAPI document served at `GET /openapi.yaml`.
    public var openAPIDocument = InstalledFiles.locate("openapi.yaml")
    /// Whether to log one `request` line per response (at the `info` level).
    public var accessLog = true
    /// Where `POST /admin/backups` writes copies; `backups` beside the database when `nil`.
    public var backupDirectory: String?

    /// The defaults above.
    public init() {}
}

/// The assembled service: store, routes and server. The one place that wires routes,
/// handlers and error mapping, used by both the executable and the tests.
public final class CatalogApplication: Sendable {
    /// The HTTP server.
    public let server: HTTPServer
    /// The database.
    public let store: CatalogStore
    /// Whether this start loaded the demo catalog.
    public let seeded: Bool
    /// The release of this build.
    public static let version = "0.3.0"

    /// Opens the database (applying migrations and, when asked and empty, the demo
    /// catalog) and builds the server. Nothing listens until ``start()``.
    public init(configuration: CatalogConfiguration) throws {
        let migrations = try Migration.load(from: configuration.migrationsDirectory)
        store = try CatalogStore(path: configuration.databasePath, migrations: migrations,
                                 readers: configuration.server.loopThreads + 2)
        seeded = configuration.seedDemoCatalog ? try store.seedDemoCatalogIfEmpty() : false
        let metrics = Metrics(version: Self.version, sqliteVersion: store.sqliteVersion)
        var serverConfiguration = configuration.server
        let accessLog = configuration.accessLog ? AccessLog.observer(Logger(label: "catalog.http")) : nil
        serverConfiguration.requestObserver = { request in
            metrics.observe(request)
            accessLog?(request)
        }
        let contract = Contract(document: configuration.openAPIDocument)
        let reference = ServerReference()
        let backups = Backups(store: store, directory: configuration.backupDirectory
            ?? URL(fileURLWithPath: configuration.databasePath).deletingLastPathComponent().appendingPathComponent("backups").path)
        let router = Self.router(store, contract: contract, migrations: migrations, server: reference, metrics: metrics, backups: backups)
        server = try HTTPServer(configuration: serverConfiguration, router: router, errorRenderer: { ErrorMapping.render($0, context: $1) })
        reference.set(server)
    }

    /// Every route the service serves.
    static func router(_ store: CatalogStore, contract: Contract, migrations: [Migration], server: ServerReference, metrics: Metrics,
                       backups: Backups) -> Router {
        var router = Router()
        router.add(.GET, "/healthz", .inline { _ in Health.liveness })
        router.add(.GET, "/readyz", .inline { _ in
            try Health.readiness(draining: server.isShuttingDown, databaseReady: store.isReady(migrations: migrations))
        })
        router.add(.GET, "/openapi.yaml", .inline { _ in try contract.response() })
        router.add(.GET, "/metrics", .inline { _ in
            HTTPResponse(status: .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                         body: Array(metrics.render(server: server).utf8))
        })
        // Blocking: a backup copies the whole database.
        router.add(.POST, "/admin/backups", .blocking { _ in try backups.create() })
        let imports = Imports(store: store)
        router.add(.POST, "/admin/import", .later { try imports.apply($0, $1) })
        ResourceEndpoints(store.items, catalog: store, metrics: metrics).register(in: &router)
        ResourceEndpoints(store.games, catalog: store, metrics: metrics).register(in: &router)
        ResourceEndpoints(store.locations, catalog: store, metrics: metrics).register(in: &router)
        let playlists = ResourceEndpoints(store.playlists, catalog: store, metrics: metrics)
        playlists.register(in: &router)
        PlaylistEntries(store: store.entries, endpoints: playlists, itemFields: FieldSet(store.items)).register(in: &router)
        Comments(store, metrics: metrics).register(in: &router)
        return router
    }

    /// Starts listening. - Returns: the bound port.
    @discardableResult
    public func start() throws -> Int { try server.start() }

    /// Serves until SIGTERM or SIGINT, then drains and closes the database.
    public func runUntilSignal() throws {
        server.runUntilSignal()
        try store.close()
    }

    /// Drains the server and closes the database.
    public func shutdown() throws {
        server.shutdown()
        try store.close()
    }
}
