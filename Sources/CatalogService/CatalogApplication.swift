import CatalogIdentity
import CatalogMedia
import CatalogModels
import CatalogStore
import Foundation
import HTTPServer
import Logging

/// The assembled service: store, routes and server. The one place that wires routes,
/// handlers and error mapping, used by both the executable and the tests.
public final class CatalogApplication: Sendable {
    /// The HTTP server.
    public let server: HTTPServer
    /// The database.
    public let store: CatalogStore
    /// The listener serving only `/metrics`, when one is configured.
    public let metricsServer: HTTPServer?
    /// Every route with who may call it, as `METHOD pattern access` (for the role × route test).
    public let routeTable: [(method: String, pattern: String, access: String)]
    private let tokens: (verifier: TokenVerifier, settings: IdentityTokenSettings)?
    private let authenticator: Authenticator
    private let changeHub: ChangeHub
    /// Where long-polls and streams of viewers' own feeds wait.
    private let viewerHub: ChangeHub
    /// The unsent bytes the event streams share.
    public let streamBudget: StreamBudget
    /// Whether this start loaded the demo catalog.
    public let seeded: Bool
    /// The images: media store, renditions and their cache.
    let images: ImageLibrary
    /// What removes images nothing shows any more.
    let imageSweep: ImageSweep
    let countBatches: CountBatches
    /// Hosted video: its processing workers and sweeps.
    let videoProcessor: VideoProcessor
    /// What signs and checks media paths.
    let playbackSigner: PlaybackSigner
    /// What sends webhooks; `nil` when they are not sent from here.
    let webhookWorker: WebhookWorker?
    /// Whether this server is the only one (a local media directory and SQLite): what a
    /// crash left held is let go at start.
    private let recoversVideosAlone: Bool
    /// The release of this build.
    public static let version = "0.4.0"

    /// Opens the database (applying migrations and, when asked and empty, the demo
    /// catalog) and builds the server. Nothing listens until ``start()``.
    public init(configuration: CatalogConfiguration) throws {
        let location = DatabaseLocation(configuration.databasePath)
        let migrations = try Migration.load(from: configuration.migrationsDirectory, for: location.engine)
        // Every thread that may read at once has a connection: the loops (SQLite) or the
        // database pool (PostgreSQL), the expensive reads' pool, the webhook dispatcher and
        // sender, and two to spare.
        let readingThreads = location.engine == .postgresql ? DatabaseWork.threads : configuration.server.loopThreads
        store = try CatalogStore(
            location, migrations: migrations, readers: readingThreads + ExpensiveReads.threads + WebhookWorker.readingThreads + 2,
            loops: configuration.server.loopThreads)
        seeded = configuration.seedDemoCatalog ? try store.seedDemoCatalogIfEmpty() : false
        let metrics = Metrics(version: Self.version, engine: location.engine, engineVersion: store.engineVersion)
        let mediaStore: any MediaStore =
            if let address = configuration.mediaStore {
                try S3MediaStore(
                    S3MediaStore.Address(address, environment: configuration.mediaStoreEnvironment ?? ProcessInfo.processInfo.environment),
                    environment: configuration.mediaStoreEnvironment ?? ProcessInfo.processInfo.environment)
            } else {
                try LocalMediaStore(directory: configuration.mediaDirectory ?? Self.defaultMediaDirectory(databasePath: configuration.databasePath))
            }
        images = ImageLibrary(
            store: mediaStore,
            cache: try RenditionCache(
                directory: configuration.imageCacheDirectory ?? Self.besideDatabase("image-cache", configuration.databasePath),
                diskBudget: configuration.imageCacheBytes, memoryBudget: configuration.imageMemoryBytes))
        imageSweep = ImageSweep(records: store.images, library: images, grace: configuration.imageGrace)
        let videoStorage = try Self.videoStorage(mediaStore, configuration)
        let leases = UploadLeases(server: Crypto.hex(try Crypto.randomBytes(6)))
        recoversVideosAlone = !store.mayBeShared && videoStorage is LocalVideoStorage
        videoProcessor = VideoProcessor(
            records: store.videos, storage: videoStorage, pipeline: VideoPipeline(), images: images, imageRecords: store.images, leases: leases,
            publicURL: configuration.publicURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 },
            scratch: { [videoStorage] name in
                if let local = videoStorage as? LocalVideoStorage { return try local.scratchDirectory(name) }
                let path = (videoStorage as? S3VideoStorage).map { $0.spool + "/" + name } ?? NSTemporaryDirectory() + name
                try? FileManager.default.removeItem(atPath: path)
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
                return path
            }, maxBytes: configuration.videoMaxBytes, workers: configuration.videoWorkers)
        let webhooks = try Self.webhooks(configuration, store: store, holder: leases.server)
        webhookWorker = webhooks.worker
        if let worker = webhooks.worker { metrics.observeWebhooks { worker.counters.withLock { $0 } } }
        if location.engine == .postgresql { metrics.observeLoopReads { [store] in store.loopReads } }
        let videoSettings = VideoSettings(maxBytes: configuration.videoMaxBytes, quotaBytes: configuration.videoQuotaBytes)
        countBatches = CountBatches(counter: store.counts)
        if seeded, configuration.seedDemoArtwork { DemoImages.add(to: store, library: images) }
        metrics.observeImages { [images] in
            let usage = images.cache.usage
            return (images.renditionsMade, usage.disk, usage.memory)
        }
        var serverConfiguration = configuration.server
        if !configuration.corsAllowedOrigins.isEmpty {
            serverConfiguration.cors = CORSPolicy(
                allowedOrigins: configuration.corsAllowedOrigins,
                allowedHeaders: [
                    "Authorization", "Cache-Control", "Content-Type", "If-Match", "If-None-Match", "Idempotency-Key", "Last-Event-ID",
                    "X-Request-Id",
                ],
                exposedHeaders: ["ETag", "Link", "Location", "RateLimit", "RateLimit-Policy", "Retry-After", "X-Request-Id"])
        }
        let accessLog = configuration.accessLog ? AccessLog.observer(Logger(label: "catalog.http")) : nil
        serverConfiguration.requestObserver = { request in
            metrics.observe(request)
            accessLog?(request)
        }
        let contract = Contract(document: configuration.openAPIDocument)
        let limiter = configuration.rateLimits.map(RateLimiter.init(policies:))
        let reference = ServerReference(limiter: limiter)
        let backups = Backups(
            store: store,
            directory: configuration.backupDirectory
                ?? Self.defaultBackupDirectory(databasePath: configuration.databasePath), keep: configuration.backupKeep,
            media: mediaStore as? LocalMediaStore)
        if let settings = configuration.identityTokens {
            tokens = (TokenVerifier(keys: try settings.loadKeys(), issuers: settings.issuers, audiences: settings.audiences), settings)
        } else {
            tokens = nil
        }
        authenticator = Authenticator(accounts: store.accounts, tokens: tokens?.verifier, watch: store.credentials)
        if configuration.requireSignedPlayback, configuration.playbackKeyFile == nil, store.mayBeShared || videoStorage is S3VideoStorage {
            // Each replica would make a key of its own, and refuse the others' signatures.
            throw MediaStoreError("Signed playback on several servers needs the same key on each: set --playback-key-file.")
        }
        playbackSigner = try PlaybackSigner(
            required: configuration.requireSignedPlayback, keyFile: configuration.playbackKeyFile,
            lifetime: Int(configuration.playbackLifetime.components.seconds),
            publicURL: configuration.publicURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 })
        var routes = Routes(
            authenticator: authenticator, readsNeedCredential: configuration.requireAuthForReads, limiter: limiter,
            idempotency: Idempotency(store: store.idempotency), databaseWork: store.readsBlock ? DatabaseWork.pool : nil,
            publicMaxAge: configuration.publicMaxAge, playbackSigner: playbackSigner.required ? playbackSigner : nil)
        streamBudget = StreamBudget(limit: configuration.maxUnsentStreamBytes)
        changeHub = ChangeHub(
            log: store.changes, retention: configuration.changeRetention, streamBudget: streamBudget,
            isShuttingDown: { reference.isShuttingDown })
        viewerHub = ChangeHub(
            log: store.viewerChanges, retention: configuration.changeRetention, streamBudget: streamBudget,
            isShuttingDown: { reference.isShuttingDown })
        // Long-polls and streams of both feeds.
        metrics.observeChangeFeed { [changeHub, viewerHub] in
            let (catalog, viewers) = (changeHub.counts, viewerHub.counts)
            return (catalog.waiters + viewers.waiters, catalog.streams + viewers.streams)
        }
        let catalogID = try store.changes.catalogID()
        let feeds = [
            ChangeFeed(
                kind: ChangeFeed.catalogKind(catalogID), log: store.changes, hub: changeHub, retention: configuration.changeRetention, streamBudget: streamBudget,
                limiter: limiter),
            ChangeFeed(
                kind: ChangeFeed.viewerKind(catalogID), log: store.viewerChanges, hub: viewerHub, retention: configuration.changeRetention,
                streamBudget: streamBudget, limiter: limiter),
        ]
        Self.register(
            in: &routes, store, contract: contract, migrations: migrations, server: reference, metrics: metrics, backups: backups, feeds: feeds,
            images: ImageEndpoints(library: images, records: store.images, privateReads: configuration.requireAuthForReads, memberQuota: configuration.imageQuotaBytes),
            imageSweep: imageSweep)
        VideoUploads(records: store.videos, storage: videoStorage, settings: videoSettings, leases: leases, jobQueued: { [videoProcessor] in videoProcessor.jobQueued() })
            .register(in: &routes)
        VideoServing(records: store.videos, storage: videoStorage, privateReads: configuration.requireAuthForReads, signer: playbackSigner)
            .register(in: &routes)
        WebhookRoutes(store: store.webhooks, secrets: webhooks.secrets, policy: webhooks.policy, worker: webhooks.worker).register(in: &routes)
        routeTable = routes.table.map { ($0.method.rawValue, $0.pattern, $0.access.rawValue) }
        let render: ErrorRenderer = { ErrorMapping.render($0, context: $1) }
        server = try HTTPServer(configuration: serverConfiguration, router: routes.router, errorRenderer: render)
        reference.set(server)
        if let (host, port) = configuration.metricsListener {
            var router = Router()
            router.add(.GET, "/metrics", .blocking { _ in Self.metricsResponse(metrics, reference) })
            var listener = ServerConfiguration()
            listener.host = host
            listener.port = port
            listener.loopThreads = 1
            listener.maxConnections = 64
            metricsServer = try HTTPServer(configuration: listener, router: router, errorRenderer: render)
        } else {
            metricsServer = nil
        }
    }

    /// Where backups go when no folder is configured: `backups` beside the database.
    public static func defaultBackupDirectory(databasePath: String) -> String {
        besideDatabase("backups", databasePath)
    }

    /// The folder of images beside the backup `path` (`….sqlite` → `….media`).
    public static func backupMediaFolder(of path: String) -> String {
        Backups.mediaFolder(of: path)
    }

    /// Puts the images kept beside the backup `path` (``backupMediaFolder(of:)``) into the
    /// image folder `mediaDirectory`: how many the backup holds, or `nil` when it has none
    /// beside it (a backup from before images, or of a server keeping them in S3).
    public static func restoreImages(from path: String, to mediaDirectory: String) throws -> Int? {
        let folder = backupMediaFolder(of: path)
        guard FileManager.default.fileExists(atPath: folder) else { return nil }
        return try LocalMediaStore(directory: folder).copyOriginals(to: mediaDirectory)
    }

    /// Where images are kept when no folder (and no S3 store) is configured: `media` beside the database.
    public static func defaultMediaDirectory(databasePath: String) -> String {
        besideDatabase("media", databasePath)
    }

    /// The folder `name` beside the SQLite file `databasePath`, or in `./data` for a
    /// PostgreSQL database.
    static func besideDatabase(_ name: String, _ databasePath: String) -> String {
        guard case .file = DatabaseLocation(databasePath) else { return "./data/" + name }
        return URL(fileURLWithPath: databasePath).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Removes the images no resource has shown for `grace` (the server sweeps every hour
    /// with its configured grace): how many unreferenced images and unrecorded originals went.
    @discardableResult
    public func sweepImages(grace: Duration? = nil) throws -> (unreferenced: Int, orphans: Int) {
        try (grace.map { ImageSweep(records: store.images, library: images, grace: $0) } ?? imageSweep).run()
    }

    /// Adds the likes and views waiting to the items' counts now (the server does every
    /// two seconds): the items whose counts changed.
    @discardableResult
    public func applyCounts() throws -> Set<CatalogID> {
        try store.counts.apply()
    }

    /// Every route the service serves, with who may call it.
    static func register(
        in routes: inout Routes, _ store: CatalogStore, contract: Contract, migrations: [Migration], server: ServerReference,
        metrics: Metrics, backups: Backups, feeds: [ChangeFeed], images: ImageEndpoints, imageSweep: ImageSweep
    ) {
        routes.add(.GET, "/healthz", .open, usesDatabase: false, .inline { _, _ in Health.liveness })
        routes.add(
            .GET, "/readyz", .open,
            .inline { _, _ in
                try Health.readiness(draining: server.isShuttingDown, databaseReady: store.isReady(migrations: migrations))
            })
        routes.add(.GET, "/openapi.yaml", .open, usesDatabase: false, caching: .shared, .inline { _, _ in try contract.response() })
        // Off the event loop: rendering is not free, and a loop must stay free for requests.
        routes.add(.GET, "/metrics", .admin, caching: .noStore, .blocking { _, _, _ in metricsResponse(metrics, server) })
        // Blocking: a backup copies the whole database.
        // A copy of a large database takes minutes: as long as `catalog-server backup` waits.
        routes.add(.POST, "/admin/backups", .admin, rate: .expensive, timeout: .seconds(600), .blocking { _, _, isAbandoned in try backups.create(isAbandoned: isAbandoned) })
        let imports = Imports(store: store)
        routes.add(
            .POST, "/admin/import", .admin, rate: .expensive, timeout: .seconds(300), maxBody: BodyLimits.unbounded,
            .later { request, _, options, done in try imports.apply(request, options, done) })
        // Every declared resource with the routes every resource gets; the others' own below.
        for resource in store.resources where resource.schema.standardRoutes {
            let endpoints = ResourceEndpoints(resource, catalog: store, metrics: metrics)
            endpoints.register(in: &routes)
            images.registerUploads(for: endpoints, in: &routes)
        }
        images.registerUploads(for: ResourceEndpoints(store.accounts.users, catalog: store, metrics: metrics), in: &routes)
        images.registerServing(in: &routes)
        images.registerImports(in: &routes)
        let playlists = ResourceEndpoints(store.playlists, catalog: store, metrics: metrics)
        PlaylistEntries(store: store.entries, endpoints: playlists, itemFields: FieldSet(store.items)).register(in: &routes)
        Comments(store, metrics: metrics).register(in: &routes)
        Accounts(store, metrics: metrics, authenticator: routes.authenticator, imageSweep: imageSweep).register(in: &routes)
        Viewers(store: store).register(in: &routes)
        for feed in feeds { feed.register(in: &routes) }
    }

    private static func metricsResponse(_ metrics: Metrics, _ server: ServerReference) -> HTTPResponse {
        var response = HTTPResponse(status: .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body: Array(metrics.render(server: server).utf8))
        response.cacheControl = "no-store"
        return response
    }

    /// Reads the identity provider's key set file again (on SIGHUP); the old keys stay
    /// when the file cannot be read or holds an invalid key.
    /// - Returns: how many keys are now in use.
    @discardableResult
    public func reloadIdentityKeys() throws -> Int {
        guard let tokens else { return 0 }
        tokens.verifier.replaceKeys(try tokens.settings.loadKeys())
        // Tokens signed by a key no longer there must not go on working from memory.
        authenticator.forgetIdentityTokens()
        return tokens.verifier.keyCount
    }

    /// Starts listening (and the metrics listener, when configured). - Returns: the bound port.
    @discardableResult
    public func start() throws -> Int {
        let port = try server.start()
        try metricsServer?.start()
        countBatches.start()
        if recoversVideosAlone { try store.videos.recoverAlone() }
        videoProcessor.start()
        if !store.mayBeShared { try store.webhookQueue.recoverAlone() }
        webhookWorker?.start()
        return port
    }

    /// Serves until SIGTERM or SIGINT, then drains and closes the database; sweeps the
    /// images nothing shows every hour meanwhile.
    public func runUntilSignal() throws {
        imageSweep.start(every: .seconds(3600))
        server.runUntilSignal()
        videoProcessor.stop()
        webhookWorker?.stop()
        metricsServer?.shutdown()
        changeHub.stop()
        viewerHub.stop()
        countBatches.stop()
        // What is waiting is added before the database closes; closing comes whatever happens.
        do { try store.counts.apply() } catch { Logger(label: "catalog.counts").warning("Adding up likes and views at shutdown failed: \(error)") }
        try store.close()
    }

    /// Drains the server and closes the database.
    public func shutdown() throws {
        videoProcessor.stop()
        webhookWorker?.stop()
        server.shutdown()
        metricsServer?.shutdown()
        changeHub.stop()
        viewerHub.stop()
        countBatches.stop()
        try store.close()
    }
}
