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
        subcommands: [Migrate.self, Healthcheck.self, Backup.self, Restore.self, Keys.self])

    @Option(help: "The address to listen on [CATALOG_HOST, default 127.0.0.1]; 0.0.0.0 for every interface.")
    var host: String?

    @Option(help: "The TCP port [CATALOG_PORT, default 8080]; 0 picks a free one.")
    var port: String?

    @Option(help: "Event loop threads [CATALOG_LOOP_THREADS, default: one per core].")
    var loopThreads: String?

    @Option(help: "Most simultaneous connections [CATALOG_MAX_CONNECTIONS, default 10000].")
    var maxConnections: String?

    @Option(help: "Most simultaneous connections from one client address, an IPv6 client's /64 [CATALOG_MAX_CONNECTIONS_PER_ADDRESS, default 128].")
    var maxConnectionsPerAddress: String?

    @Option(help: "Most bytes of partly received request bodies held at once [CATALOG_MAX_BUFFERED_BODY_BYTES, default 67108864].")
    var maxBufferedBodyBytes: String?

    @Option(help: "Most bytes of partly received request bodies one client address holds at once, its share of --max-buffered-body-bytes [CATALOG_MAX_BUFFERED_BODY_BYTES_PER_ADDRESS, default 4194304; at least --max-body-size].")
    var maxBufferedBodyBytesPerAddress: String?

    @Option(help: "Networks of the proxies in front of the server whose word on the client's address is believed, such as 10.0.0.0/8,::1 [CATALOG_TRUSTED_PROXIES, comma-separated; default none].")
    var trustedProxies: [String] = []

    @Option(help: "Where trusted proxies give the client's address: x-forwarded-for, forwarded (RFC 7239) or proxy-protocol (version 2) [CATALOG_PROXY_CLIENT_ADDRESS, default x-forwarded-for].")
    var proxyClientAddress: String?

    @Option(help: "Seconds clients may reuse a public catalog read without asking again, sent as max-age [CATALOG_PUBLIC_MAX_AGE, default 0: no-cache, revalidate with the ETag].")
    var publicMaxAge: String?

    @Option(help: "Most bytes all change-feed event streams hold unsent together; past it the streams furthest behind are cut, and resume with Last-Event-ID [CATALOG_MAX_UNSENT_STREAM_BYTES, default 67108864].")
    var maxUnsentStreamBytes: String?

    @Option(help: "Largest request body in bytes [CATALOG_MAX_BODY_SIZE, default 1048576].")
    var maxBodySize: String?

    @Option(help: "Seconds to receive a whole request head [CATALOG_HEAD_TIMEOUT, default 10].")
    var headTimeout: String?

    @Option(help: "Seconds to receive a whole request body, from the end of its head [CATALOG_BODY_TIMEOUT, default 30].")
    var bodyTimeout: String?

    @Option(help: "Seconds a request may wait for its answer, queued or running, before a 503 [CATALOG_REQUEST_TIMEOUT, default 60].")
    var requestTimeout: String?

    @Option(help: "Seconds an idle keep-alive connection stays open [CATALOG_KEEP_ALIVE_TIMEOUT, default 75].")
    var keepAliveTimeout: String?

    @Option(help: "Seconds a graceful shutdown waits for requests in flight [CATALOG_SHUTDOWN_TIMEOUT, default 10].")
    var shutdownTimeout: String?

    @Flag(help: "Do not load the demo catalog into an empty database [CATALOG_SEED=false].")
    var noSeed = false

    @Option(help: "trace, debug, info (one line per request), notice, warning, error or critical [CATALOG_LOG_LEVEL, default info].")
    var logLevel: String?

    @Option(help: "text or json, one line per entry on standard output [CATALOG_LOG_FORMAT, default text].")
    var logFormat: String?

    @Option(help: "Where POST /admin/backups writes copies [CATALOG_BACKUP_DIR, default: backups beside the database].")
    var backupDir: String?

    @Option(help: "How many backups the backup folder keeps, the newest; older ones are deleted [CATALOG_BACKUP_KEEP, default 7].")
    var backupKeep: String?

    @Option(help: "How long the change feed keeps deletions and accepts a sync token, such as 30d, 12h or 3600s [CATALOG_CHANGE_RETENTION, default 30d].")
    var changeRetention: String?

    @Flag(help: "Require a credential for reads too [CATALOG_REQUIRE_AUTH_FOR_READS=true]; by default anyone reads the public catalog.")
    var requireAuthForReads = false

    @Option(help: "The identity provider's JWKS file, read again on SIGHUP [CATALOG_JWKS_FILE]; without it identity tokens are refused.")
    var jwksFile: String?

    @Option(help: "An accepted identity token issuer (iss); repeat for several [CATALOG_JWT_ISSUERS, comma-separated].")
    var jwtIssuer: [String] = []

    @Option(help: "An accepted identity token audience (aud); repeat for several [CATALOG_JWT_AUDIENCES, comma-separated].")
    var jwtAudience: [String] = []

    @Option(help: "HOST:PORT of a separate listener serving only /metrics, without credentials [CATALOG_METRICS_ADDRESS]; keep it on loopback.")
    var metricsAddress: String?

    @Option(help: "Rate budgets per API key, user or client address: off, or CLASS=REQUESTS/SECONDS for any of read, write and expensive, comma-separated [CATALOG_RATE_LIMITS, default read=1200/60,write=300/60,expensive=60/60].")
    var rateLimits: String?

    @Option(help: "An exact origin of a browser app allowed to call the API, such as https://app.example.com; repeat for several [CATALOG_CORS_ALLOWED_ORIGINS, comma-separated; default none].")
    var corsAllowedOrigins: [String] = []

    @Option(help: "The PEM certificate, followed by its chain, of a listener that then speaks TLS only; read again on SIGHUP [CATALOG_TLS_CERTIFICATE]. Needs --tls-private-key.")
    var tlsCertificate: String?

    @Option(help: "The certificate's private key, PEM and unencrypted, readable by the server's user only [CATALOG_TLS_PRIVATE_KEY].")
    var tlsPrivateKey: String?

    @Flag(help: "Send Strict-Transport-Security: max-age=63072000 (two years) with every response [CATALOG_HSTS=true]; only once HTTPS is there to stay.")
    var hsts = false

    @OptionGroup var storage: StorageOptions

    func run() throws {
        // Before any thread starts: a SIGTERM or SIGINT that arrives while the server starts
        // (migrations included) is kept for the drain once it listens, and a SIGHUP for the
        // reload (its dispatch source reads it from a signalfd, which wants it blocked).
        HTTPServer.holdSignals([SIGTERM, SIGINT, SIGHUP])
        let (configuration, level, format) = try Settings.resolving { settings throws(SettingError) in
            (try self.configuration(settings),
             try settings.choice(logLevel, "CATALOG_LOG_LEVEL", default: Logger.Level.info, from: Logger.Level.allCases.map { ($0.rawValue, $0) }),
             try settings.choice(logFormat, "CATALOG_LOG_FORMAT", default: LogFormat.text, from: LogFormat.allCases.map { ($0.rawValue, $0) }))
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
        let bound = try application.start()
        if let metrics = application.metricsServer, let (host, _) = configuration.metricsListener {
            logger.info("metrics on http://\(host):\(metrics.port)/metrics")
        }
        let reload = Self.reloadOnHangUp(application, configuration, logger)
        defer { reload.cancel() }
        let scheme = configuration.server.tls == nil ? "http" : "https"
        logger.info("catalog-server listening on \(scheme)://\(configuration.server.host):\(bound)", metadata: [
            "version": "\(CatalogApplication.version)", "database": "\(application.store.location)",
            "engine": "\(application.store.engineVersion)", "loopThreads": "\(configuration.server.loopThreads)",
        ])
        try application.runUntilSignal()
        logger.info("catalog-server stopped")
    }


    /// Reads the JWKS file and the TLS certificate and key again on each SIGHUP; a bad
    /// file keeps what is in use and logs one error line.
    private static func reloadOnHangUp(_ application: CatalogApplication, _ configuration: CatalogConfiguration,
                                       _ logger: Logger) -> any DispatchSourceSignal {
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

    private func configuration(_ settings: Settings) throws(SettingError) -> CatalogConfiguration {
        var configuration = CatalogConfiguration()
        configuration.server.host = try settings.text(host, "CATALOG_HOST", default: "127.0.0.1")
        configuration.server.port = try settings.integer(port, "CATALOG_PORT", default: 8080, in: 0...65535)
        configuration.server.loopThreads = try settings.integer(loopThreads, "CATALOG_LOOP_THREADS", default: configuration.server.loopThreads, in: 1...256)
        configuration.server.maxConnections = try settings.integer(maxConnections, "CATALOG_MAX_CONNECTIONS", default: 10_000, in: 1...1_000_000)
        configuration.server.maxConnectionsPerAddress = try settings.integer(maxConnectionsPerAddress, "CATALOG_MAX_CONNECTIONS_PER_ADDRESS",
                                                                             default: 128, in: 1...1_000_000)
        configuration.server.maxBufferedBodyBytes = try settings.integer(maxBufferedBodyBytes, "CATALOG_MAX_BUFFERED_BODY_BYTES",
                                                                         default: 64 << 20, in: 1...(1 << 40))
        configuration.server.maxBufferedBodyBytesPerAddress = try settings.integer(
            maxBufferedBodyBytesPerAddress, "CATALOG_MAX_BUFFERED_BODY_BYTES_PER_ADDRESS", default: 4 << 20, in: 1...(1 << 40))
        configuration.server.limits.maxBody = try settings.integer(maxBodySize, "CATALOG_MAX_BODY_SIZE", default: 1024 * 1024, in: 1...(1 << 30))
        configuration.maxUnsentStreamBytes = try settings.integer(maxUnsentStreamBytes, "CATALOG_MAX_UNSENT_STREAM_BYTES", default: 64 << 20,
                                                                  in: (1 << 20)...(1 << 40))
        let maxAge = try settings.integer(publicMaxAge, "CATALOG_PUBLIC_MAX_AGE", default: 0, in: 0...86_400)
        configuration.publicMaxAge = maxAge > 0 ? maxAge : nil
        let proxies = try settings.list(trustedProxies, "CATALOG_TRUSTED_PROXIES")
        let source = try settings.choice(proxyClientAddress, "CATALOG_PROXY_CLIENT_ADDRESS", default: TrustedProxies.Source.xForwardedFor,
                                         from: TrustedProxies.Source.allCases.map { ($0.rawValue, $0) })
        if !proxies.isEmpty {
            switch TrustedProxies.parse(proxies.joined(separator: ",")) {
            case let .success(trusted): configuration.server.trustedProxies = TrustedProxies(trusted.networks, source: source)
            case let .failure(error): throw SettingError(description: "--trusted-proxies: \(error.description)")
            }
        }
        configuration.server.headTimeout = try settings.seconds(headTimeout, "CATALOG_HEAD_TIMEOUT", default: 10)
        configuration.server.bodyTimeout = try settings.seconds(bodyTimeout, "CATALOG_BODY_TIMEOUT", default: 30)
        configuration.server.requestTimeout = try settings.seconds(requestTimeout, "CATALOG_REQUEST_TIMEOUT", default: 60)
        configuration.server.keepAliveTimeout = try settings.seconds(keepAliveTimeout, "CATALOG_KEEP_ALIVE_TIMEOUT", default: 75)
        configuration.server.shutdownTimeout = try settings.seconds(shutdownTimeout, "CATALOG_SHUTDOWN_TIMEOUT", default: 10)
        configuration.seedDemoCatalog = noSeed ? false : try settings.boolean(nil, "CATALOG_SEED", default: true)
        configuration.databasePath = try storage.database(settings)
        configuration.migrationsDirectory = try storage.migrationsDirectory(settings)
        configuration.backupDirectory = try settings.optionalText(backupDir, "CATALOG_BACKUP_DIR")
        configuration.backupKeep = try settings.integer(backupKeep, "CATALOG_BACKUP_KEEP", default: 7, in: 1...10_000)
        configuration.changeRetention = try settings.period(changeRetention, "CATALOG_CHANGE_RETENTION", default: .seconds(30 * 86_400))
        configuration.requireAuthForReads = requireAuthForReads ? true : try settings.boolean(nil, "CATALOG_REQUIRE_AUTH_FOR_READS", default: false)
        if let file = try settings.optionalText(jwksFile, "CATALOG_JWKS_FILE") {
            let issuers = try settings.list(jwtIssuer, "CATALOG_JWT_ISSUERS"), audiences = try settings.list(jwtAudience, "CATALOG_JWT_AUDIENCES")
            guard !issuers.isEmpty, !audiences.isEmpty else {
                throw SettingError(description: "--jwks-file needs at least one --jwt-issuer and one --jwt-audience")
            }
            configuration.identityTokens = IdentityTokenSettings(keySetFile: file, issuers: issuers, audiences: audiences)
        }
        let origins = try settings.list(corsAllowedOrigins, "CATALOG_CORS_ALLOWED_ORIGINS")
        if let bad = origins.first(where: { !CORSPolicy.isOrigin($0) }) {
            throw SettingError(description: "--cors-allowed-origins takes origins such as https://app.example.com (no path, no *), not '\(bad)'")
        }
        configuration.corsAllowedOrigins = Set(origins.map { $0.lowercased() })  // browsers send origins in lower case
        if let text = try settings.optionalText(rateLimits, "CATALOG_RATE_LIMITS") {
            guard let policies = RatePolicy.parse(text) else {
                throw SettingError(description: "--rate-limits must be off or CLASS=REQUESTS/SECONDS,… (read, write, expensive), not '\(text)'")
            }
            configuration.rateLimits = policies
        }
        let certificate = try settings.optionalText(tlsCertificate, "CATALOG_TLS_CERTIFICATE")
        let key = try settings.optionalText(tlsPrivateKey, "CATALOG_TLS_PRIVATE_KEY")
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
        let sendsHSTS = try settings.boolean(nil, "CATALOG_HSTS", default: false)
        if hsts || sendsHSTS {
            configuration.server.strictTransportSecurity = "max-age=63072000"
        }
        if let address = try settings.optionalText(metricsAddress, "CATALOG_METRICS_ADDRESS") {
            guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (0...65535).contains(port),
                  colon != address.startIndex else {
                throw SettingError(description: "--metrics-address must be HOST:PORT, such as 127.0.0.1:9100, not '\(address)'")
            }
            configuration.metricsListener = (String(address[..<colon]), port)
        }
        return configuration
    }
}
