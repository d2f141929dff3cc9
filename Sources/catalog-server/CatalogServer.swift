import ArgumentParser
import CLinux
import CatalogIdentity
import CatalogModels
import CatalogService
import CatalogStore
import Foundation
import HTTPServer
import Logging

/// `catalog-server`: serves the catalog (and, as `migrate`, only migrates it).
///
/// Every setting has a flag and an environment variable: a flag wins over the
/// environment, which wins over the default. An invalid value stops startup with one
/// line naming the setting, and exit code 64.
@main
struct CatalogServer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog-server",
        abstract: "Serves the video catalog over HTTP/1.1.",
        discussion: "Every option can also be set with the environment variable in brackets; a flag wins over the environment, which wins over the default.",
        subcommands: [Migrate.self, Healthcheck.self, Backup.self, Restore.self, Keys.self, VideoCommands.self])

    @Option(help: ServerSettings.host.help) var host: String?
    @Option(help: ServerSettings.port.help) var port: String?
    @Option(help: ServerSettings.loopThreads.help) var loopThreads: String?
    @Option(help: ServerSettings.maxConnections.help) var maxConnections: String?
    @Option(help: ServerSettings.maxConnectionsPerAddress.help) var maxConnectionsPerAddress: String?
    @Option(help: ServerSettings.maxBufferedBodyBytes.help) var maxBufferedBodyBytes: String?
    @Option(help: ServerSettings.maxBufferedBodyBytesPerAddress.help) var maxBufferedBodyBytesPerAddress: String?
    @Option(help: ServerSettings.trustedProxies.help) var trustedProxies: [String] = []
    @Option(help: ServerSettings.proxyClientAddress.help) var proxyClientAddress: String?
    @Option(help: ServerSettings.publicMaxAge.help) var publicMaxAge: String?
    @Option(help: ServerSettings.maxUnsentStreamBytes.help) var maxUnsentStreamBytes: String?
    @Option(help: ServerSettings.maxBodySize.help) var maxBodySize: String?
    @Option(help: ServerSettings.headTimeout.help) var headTimeout: String?
    @Option(help: ServerSettings.bodyTimeout.help) var bodyTimeout: String?
    @Option(help: ServerSettings.requestTimeout.help) var requestTimeout: String?
    @Option(help: ServerSettings.keepAliveTimeout.help) var keepAliveTimeout: String?
    @Option(help: ServerSettings.shutdownTimeout.help) var shutdownTimeout: String?
    @Flag(help: ServerSettings.seed.help) var noSeed = false
    @Option(help: ServerSettings.logLevel.help) var logLevel: String?
    @Option(help: ServerSettings.logFormat.help) var logFormat: String?
    @Option(help: ServerSettings.backupDir.help) var backupDir: String?
    @Option(help: ServerSettings.backupKeep.help) var backupKeep: String?
    @Option(help: ServerSettings.changeRetention.help) var changeRetention: String?
    @Option(help: ServerSettings.mediaStore.help) var mediaStore: String?
    @Option(help: ServerSettings.mediaDirectory.help) var mediaDirectory: String?
    @Option(help: ServerSettings.imageCacheDirectory.help) var imageCacheDirectory: String?
    @Option(help: ServerSettings.imageCacheSize.help) var imageCacheSize: String?
    @Option(help: ServerSettings.publicURL.help) var publicURL: String?
    @Flag(help: ServerSettings.requireSignedPlayback.help) var requireSignedPlayback = false
    @Option(help: ServerSettings.playbackKeyFile.help) var playbackKeyFile: String?
    @Option(help: ServerSettings.playbackLifetime.help) var playbackLifetime: String?
    @Option(help: ServerSettings.maxVideoSize.help) var maxVideoSize: String?
    @Option(help: ServerSettings.videoQuota.help) var videoQuota: String?
    @Option(help: ServerSettings.videoWorkers.help) var videoWorkers: String?
    @Option(help: ServerSettings.videoSpoolDirectory.help) var videoSpoolDirectory: String?
    @Option(help: ServerSettings.webhookKeyFile.help) var webhookKeyFile: String?
    @Option(help: ServerSettings.webhookAllowedNetworks.help) var webhookAllowedNetworks: [String] = []
    @Option(help: ServerSettings.webhookHTTPNetworks.help) var webhookHttpNetworks: [String] = []
    @Option(help: ServerSettings.webhookCAFile.help) var webhookCaFile: String?
    @Option(help: ServerSettings.webhookTimeout.help) var webhookTimeout: String?
    @Option(help: ServerSettings.webhookLease.help) var webhookLease: String?
    @Option(help: ServerSettings.webhookBacklog.help) var webhookBacklog: String?
    @Flag(help: ServerSettings.requireAuthForReads.help) var requireAuthForReads = false
    @Option(help: ServerSettings.jwksFile.help) var jwksFile: String?
    @Option(help: ServerSettings.jwtIssuers.help) var jwtIssuer: [String] = []
    @Option(help: ServerSettings.jwtAudiences.help) var jwtAudience: [String] = []
    @Option(help: ServerSettings.metricsAddress.help) var metricsAddress: String?
    @Option(help: ServerSettings.rateLimits.help) var rateLimits: String?
    @Option(help: ServerSettings.corsAllowedOrigins.help) var corsAllowedOrigins: [String] = []
    @Option(help: ServerSettings.tlsCertificate.help) var tlsCertificate: String?
    @Option(help: ServerSettings.tlsPrivateKey.help) var tlsPrivateKey: String?
    @Flag(help: ServerSettings.hsts.help) var hsts = false

    @OptionGroup var storage: StorageOptions

    /// Parses and runs the command as `ParsableCommand.main()` does, then leaves through
    /// `_exit` once it has returned (everything written, flushed and closed): `exit` runs
    /// the libraries' destructors, libkrb5's among them (loaded with libpq), while a
    /// background thread may still be ending and freeing its thread-specific data, which
    /// aborted `keys create` with a double free now and then. Errors leave as before.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            exit(withError: error)
        }
        fflush(nil)
        _exit(0)
    }

    func run() throws {
        // Before any thread starts: a SIGTERM or SIGINT that arrives while the server starts
        // (migrations included) is kept for the drain once it listens, and a SIGHUP for the
        // reload (its dispatch source reads it from a signalfd, which wants it blocked).
        HTTPServer.holdSignals([SIGTERM, SIGINT, SIGHUP])
        let (configuration, level, format) = try Settings.resolving { settings throws(SettingError) in
            (
                try self.configuration(settings),
                try ServerSettings.logLevel.read(settings, logLevel), try ServerSettings.logFormat.read(settings, logFormat)
            )
        }
        CatalogLogHandler.bootstrap(format: format, level: level)
        Self.keepFreedMemory()
        let logger = Logger(label: "catalog.server")
        defer { LogWriter.shared.flush() }
        let application: CatalogApplication
        do {
            application = try CatalogApplication(configuration: configuration)
        } catch let error as MigrationError {
            Settings.fail("cannot start: \(error)")
        } catch let error as StoreError {
            Settings.fail("cannot start: \(error)")
        }
        if let tls = configuration.server.tls { TLSFiles.check(tls, logger) }
        for name in application.store.appliedMigrations { logger.info("applied migration \(name)") }
        if application.seeded { logger.info("loaded the demo catalog") }
        Self.releaseStartUpPages(logger)
        let bound = try application.start()
        if let metrics = application.metricsServer, let (host, _) = configuration.metricsListener {
            logger.info("metrics on http://\(host):\(metrics.port)/metrics")
        }
        let reload = Self.reloadOnHangUp(application, configuration, logger)
        defer { reload.cancel() }
        let scheme = configuration.server.tls == nil ? "http" : "https"
        logger.info(
            "catalog-server listening on \(scheme)://\(configuration.server.host):\(bound)",
            metadata: [
                "version": "\(CatalogApplication.version)", "database": "\(application.store.location)",
                "engine": "\(application.store.engineVersion)", "loopThreads": "\(configuration.server.loopThreads)",
            ])
        try application.runUntilSignal()
        logger.info("catalog-server stopped")
    }

    /// Reads the JWKS file, the playback key and the TLS certificate and key again on each SIGHUP; a bad
    /// file keeps what is in use and logs one error line.
    private static func reloadOnHangUp(
        _ application: CatalogApplication, _ configuration: CatalogConfiguration,
        _ logger: Logger
    ) -> any DispatchSourceSignal {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler {
            if configuration.identityTokens != nil {
                do {
                    let count = try application.reloadIdentityKeys()
                    logger.notice("reloaded the identity keys", metadata: ["keys": "\(count)"])
                } catch {
                    logger.error("kept the identity keys in use: cannot reload them: \(error)")
                }
            }
            do {
                try application.rotatePlaybackKey()
                logger.notice("rotated the playback key (the previous one stays valid)")
            } catch {
                logger.error("kept the playback key in use: cannot read it again: \(error)")
            }
            if let tls = configuration.server.tls {
                do {
                    try tls.reload()
                    logger.notice("reloaded the TLS certificate", metadata: TLSFiles.metadata(tls))
                    TLSFiles.check(tls, logger)
                } catch {
                    logger.error("kept the TLS certificate in use: \(error)")
                }
            }
        }
        source.resume()
        return source
    }

    /// Response buffers of tens of kilobytes come and go with every request; by default
    /// glibc hands freed memory at the top of the heap back to the kernel past 128 KiB
    /// and faults it in again on the next request (`madvise`, page faults: about 5% of
    /// an `include=entries` response). Keeping up to 64 MiB of it avoids that churn.
    private static func keepFreedMemory() {
        clinux_keep_freed_memory(64 << 20)
    }

    /// Starting touches code and read-only data that serving never runs again (settings,
    /// migrations, the schema's SQL, Foundation's and the runtime's set-up): a third of the
    /// binary's 28 MB of code, which the kernel maps 64 KiB at a time around each page used.
    /// Once ready to listen, the server lets go of the pages of every read-only segment of
    /// the program and its libraries (``clinux_release_read_only_segments``). They stay in the
    /// page cache, so what serving uses comes back at its first use by a minor fault,
    /// without reading the disk; the rest stays out of the process's resident memory.
    private static func releaseStartUpPages(_ logger: Logger) {
        var before = 0
        var after = 0
        let advised = clinux_release_read_only_segments(&before, &after)
        logger.info("released start-up pages: resident \(before) kB, then \(after) kB (\(advised) kB of read-only segments)")
    }

    private func configuration(_ settings: Settings) throws(SettingError) -> CatalogConfiguration {
        typealias S = ServerSettings
        var configuration = CatalogConfiguration()
        configuration.server.host = try S.host.read(settings, host)
        configuration.server.port = try S.port.read(settings, port)
        configuration.server.loopThreads = try S.loopThreads.read(settings, loopThreads)
        configuration.server.maxConnections = try S.maxConnections.read(settings, maxConnections)
        configuration.server.maxConnectionsPerAddress = try S.maxConnectionsPerAddress.read(settings, maxConnectionsPerAddress)
        configuration.server.maxBufferedBodyBytes = try S.maxBufferedBodyBytes.read(settings, maxBufferedBodyBytes)
        configuration.server.maxBufferedBodyBytesPerAddress = try S.maxBufferedBodyBytesPerAddress.read(settings, maxBufferedBodyBytesPerAddress)
        configuration.server.limits.maxBody = try S.maxBodySize.read(settings, maxBodySize)
        configuration.maxUnsentStreamBytes = try S.maxUnsentStreamBytes.read(settings, maxUnsentStreamBytes)
        let maxAge = try S.publicMaxAge.read(settings, publicMaxAge)
        configuration.publicMaxAge = maxAge > 0 ? maxAge : nil
        let proxies = try S.trustedProxies.read(settings, trustedProxies)
        let source = try S.proxyClientAddress.read(settings, proxyClientAddress)
        if !proxies.isEmpty {
            switch TrustedProxies.parse(proxies.joined(separator: ",")) {
            case let .success(trusted): configuration.server.trustedProxies = TrustedProxies(trusted.networks, source: source)
            case let .failure(error): throw SettingError(description: "--trusted-proxies: \(error.description)")
            }
        }
        configuration.server.headTimeout = try S.headTimeout.read(settings, headTimeout)
        configuration.server.bodyTimeout = try S.bodyTimeout.read(settings, bodyTimeout)
        configuration.server.requestTimeout = try S.requestTimeout.read(settings, requestTimeout)
        configuration.server.keepAliveTimeout = try S.keepAliveTimeout.read(settings, keepAliveTimeout)
        configuration.server.shutdownTimeout = try S.shutdownTimeout.read(settings, shutdownTimeout)
        configuration.seedDemoCatalog = try S.seed.read(settings, flagGiven: noSeed)
        configuration.databasePath = try storage.database(settings)
        configuration.migrationsDirectory = try storage.migrationsDirectory(settings)
        configuration.backupDirectory = try S.backupDir.read(settings, backupDir)
        configuration.backupKeep = try S.backupKeep.read(settings, backupKeep)
        configuration.changeRetention = try S.changeRetention.read(settings, changeRetention)
        configuration.mediaStore = try S.mediaStore.read(settings, mediaStore)
        configuration.mediaDirectory = try S.mediaDirectory.read(settings, mediaDirectory)
        configuration.imageCacheDirectory = try S.imageCacheDirectory.read(settings, imageCacheDirectory)
        configuration.imageCacheBytes = try S.imageCacheSize.read(settings, imageCacheSize)
        if let url = try S.publicURL.read(settings, publicURL) {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil, parsed.query == nil,
                parsed.path.isEmpty || parsed.path == "/"
            else { throw SettingError(description: "--public-url must be an http(s) origin such as https://catalog.example.com, not '\(url)'") }
            configuration.publicURL = url
        }
        configuration.requireSignedPlayback = try S.requireSignedPlayback.read(settings, flagGiven: requireSignedPlayback)
        configuration.playbackKeyFile = try S.playbackKeyFile.read(settings, playbackKeyFile)
        configuration.playbackLifetime = try S.playbackLifetime.read(settings, playbackLifetime)
        configuration.videoMaxBytes = try S.maxVideoSize.read(settings, maxVideoSize)
        configuration.videoQuotaBytes = try S.videoQuota.read(settings, videoQuota)
        configuration.videoWorkers = try S.videoWorkers.read(settings, videoWorkers)
        configuration.videoSpoolDirectory = try S.videoSpoolDirectory.read(settings, videoSpoolDirectory)
        configuration.webhookKeyFile = try S.webhookKeyFile.read(settings, webhookKeyFile)
        configuration.webhookAllowedNetworks = try S.webhookAllowedNetworks.read(settings, webhookAllowedNetworks)
        configuration.webhookHTTPNetworks = try S.webhookHTTPNetworks.read(settings, webhookHttpNetworks)
        configuration.webhookCAFile = try S.webhookCAFile.read(settings, webhookCaFile)
        configuration.webhookTimeout = try S.webhookTimeout.read(settings, webhookTimeout)
        configuration.webhookLease = try S.webhookLease.read(settings, webhookLease)
        configuration.webhookBacklog = try S.webhookBacklog.read(settings, webhookBacklog)
        configuration.requireAuthForReads = try S.requireAuthForReads.read(settings, flagGiven: requireAuthForReads)
        if let file = try S.jwksFile.read(settings, jwksFile) {
            let issuers = try S.jwtIssuers.read(settings, jwtIssuer), audiences = try S.jwtAudiences.read(settings, jwtAudience)
            guard !issuers.isEmpty, !audiences.isEmpty else {
                throw SettingError(description: "--jwks-file needs at least one --jwt-issuer and one --jwt-audience")
            }
            configuration.identityTokens = IdentityTokenSettings(keySetFile: file, issuers: issuers, audiences: audiences)
        }
        let origins = try S.corsAllowedOrigins.read(settings, corsAllowedOrigins)
        if let bad = origins.first(where: { !CORSPolicy.isOrigin($0) }) {
            throw SettingError(description: "--cors-allowed-origins takes origins such as https://app.example.com (no path, no *), not '\(bad)'")
        }
        configuration.corsAllowedOrigins = Set(origins.map { $0.lowercased() })  // browsers send origins in lower case
        if let text = try S.rateLimits.read(settings, rateLimits) {
            guard let policies = RatePolicy.parse(text) else {
                throw SettingError(description: "--rate-limits must be off or CLASS=REQUESTS/SECONDS,… (read, write, expensive), not '\(text)'")
            }
            configuration.rateLimits = policies
        }
        let certificate = try S.tlsCertificate.read(settings, tlsCertificate)
        let key = try S.tlsPrivateKey.read(settings, tlsPrivateKey)
        switch (certificate, key) {
        case let (certificate?, key?):
            do {
                configuration.server.tls = try TLSContext(certificateFile: certificate, privateKeyFile: key)
            } catch {
                throw SettingError(description: error.description)
            }
        case (nil, nil):
            break
        default:
            throw SettingError(description: "--tls-certificate and --tls-private-key go together: give both or neither")
        }
        if try S.hsts.read(settings, flagGiven: hsts) {
            configuration.server.strictTransportSecurity = "max-age=63072000"
        }
        if let address = try S.metricsAddress.read(settings, metricsAddress) {
            guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (0...65535).contains(port),
                colon != address.startIndex
            else {
                throw SettingError(description: "--metrics-address must be HOST:PORT, such as 127.0.0.1:9100, not '\(address)'")
            }
            configuration.metricsListener = (String(address[..<colon]), port)
        }
        return configuration
    }
}
