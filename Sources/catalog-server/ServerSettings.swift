import CatalogModels
import CatalogService
import HTTPServer
import Logging

/// Every setting of `catalog-server`, each once: its variable, meaning, default and
/// bounds. `CatalogServer`'s flags take their help from here, and its configuration its
/// values; a flag wins over the variable, which wins over the default.
enum ServerSettings {
    // MARK: Listening

    static let host = Setting<String>.text(
        "CATALOG_HOST", default: "127.0.0.1", "The address to listen on",
        after: "; 0.0.0.0 for every interface.")
    static let port = Setting<Int>.integer("CATALOG_PORT", default: 8080, in: 0...65535, "The TCP port", after: "; 0 picks a free one.")
    static let loopThreads = Setting<Int>.integer(
        "CATALOG_LOOP_THREADS", default: CatalogConfiguration().server.loopThreads, in: 1...256,
        "Event loop threads", shownDefault: "one per core")
    static let tlsCertificate = Setting<String?>.optionalText(
        "CATALOG_TLS_CERTIFICATE", "The PEM certificate, followed by its chain, of a listener that then speaks TLS only; read again on SIGHUP",
        after: ". Needs --tls-private-key.")
    static let tlsPrivateKey = Setting<String?>.optionalText(
        "CATALOG_TLS_PRIVATE_KEY", "The certificate's private key, PEM and unencrypted, readable by the server's user only")
    static let hsts = SwitchSetting(
        "CATALOG_HSTS", default: false,
        "Send Strict-Transport-Security: max-age=63072000 (two years) with every response; only once HTTPS is there to stay")
    static let metricsAddress = Setting<String?>.optionalText(
        "CATALOG_METRICS_ADDRESS", "HOST:PORT of a separate listener serving only /metrics, without credentials", after: "; keep it on loopback.")

    // MARK: Limits

    static let maxConnections = Setting<Int>.integer("CATALOG_MAX_CONNECTIONS", default: 10_000, in: 1...1_000_000, "Most simultaneous connections")
    static let maxConnectionsPerAddress = Setting<Int>.integer(
        "CATALOG_MAX_CONNECTIONS_PER_ADDRESS", default: 128, in: 1...1_000_000, "Most simultaneous connections from one client address, an IPv6 client's /64")
    static let maxBufferedBodyBytes = Setting<Int>.integer(
        "CATALOG_MAX_BUFFERED_BODY_BYTES", default: 64 << 20, in: 1...(1 << 40), "Most bytes of partly received request bodies held at once")
    static let maxBufferedBodyBytesPerAddress = Setting<Int>.integer(
        "CATALOG_MAX_BUFFERED_BODY_BYTES_PER_ADDRESS", default: 4 << 20, in: 1...(1 << 40),
        "Most bytes of partly received request bodies one client address holds at once, its share of --max-buffered-body-bytes",
        shownDefault: "4194304; at least the largest body a route takes: --max-body-size, or 20000000 for an image")
    static let maxBodySize = Setting<Int>.integer("CATALOG_MAX_BODY_SIZE", default: 1 << 20, in: 1...(1 << 30), "Largest request body in bytes")
    static let maxUnsentStreamBytes = Setting<Int>.integer(
        "CATALOG_MAX_UNSENT_STREAM_BYTES", default: 64 << 20, in: (1 << 20)...(1 << 40),
        "Most bytes all change-feed event streams hold unsent together; past it the streams furthest behind are cut, and resume with Last-Event-ID")
    static let rateLimits = Setting<String?>.optionalText(
        "CATALOG_RATE_LIMITS", "Rate budgets per API key, user or client address: off, or CLASS=REQUESTS/SECONDS for any of read, write and expensive, comma-separated",
        shownDefault: "read=1200/60,write=300/60,expensive=60/60")
    static let trustedProxies = ListSetting(
        "CATALOG_TRUSTED_PROXIES", "Networks of the proxies in front of the server whose word on the client's address is believed, such as 10.0.0.0/8,::1",
        shownDefault: "none")
    static let proxyClientAddress = Setting<TrustedProxies.Source>.choice(
        "CATALOG_PROXY_CLIENT_ADDRESS", default: .xForwardedFor, from: TrustedProxies.Source.allCases.map { ($0.rawValue, $0) },
        "Where trusted proxies give the client's address: x-forwarded-for, forwarded (RFC 7239) or proxy-protocol (version 2)")
    static let corsAllowedOrigins = ListSetting(
        "CATALOG_CORS_ALLOWED_ORIGINS", "An exact origin of a browser app allowed to call the API, such as https://app.example.com; repeat for several",
        shownDefault: "none")
    static let publicMaxAge = Setting<Int>.integer(
        "CATALOG_PUBLIC_MAX_AGE", default: 0, in: 0...86_400, "Seconds clients may reuse a public catalog read without asking again, sent as max-age",
        shownDefault: "0: no-cache, revalidate with the ETag")

    // MARK: Timeouts

    static let headTimeout = Setting<Duration>.seconds("CATALOG_HEAD_TIMEOUT", default: 10, "Seconds to receive a whole request head")
    static let bodyTimeout = Setting<Duration>.seconds(
        "CATALOG_BODY_TIMEOUT", default: 30,
        "Seconds to receive a whole request body, from the end of its head")
    static let requestTimeout = Setting<Duration>.seconds(
        "CATALOG_REQUEST_TIMEOUT", default: 60,
        "Seconds a request may wait for its answer, queued or running, before a 503")
    static let keepAliveTimeout = Setting<Duration>.seconds("CATALOG_KEEP_ALIVE_TIMEOUT", default: 75, "Seconds an idle keep-alive connection stays open")
    static let shutdownTimeout = Setting<Duration>.seconds(
        "CATALOG_SHUTDOWN_TIMEOUT", default: 10,
        "Seconds a graceful shutdown waits for requests in flight")

    // MARK: Data

    static let database = Setting<String>.text(
        "CATALOG_DATABASE", default: "./data/catalog.sqlite",
        "The SQLite database file (its folder is created if missing), or a postgresql:// URL, passed to libpq as it is (sslmode, several hosts, target_session_attrs)")
    static let migrations = Setting<String?>.optionalText(
        "CATALOG_MIGRATIONS", "A folder of NNNN_description.sql migrations to run instead of those built in (PostgreSQL's in its postgresql folder)",
        shownDefault: "the ones this build carries")
    static let seed = SwitchSetting("CATALOG_SEED", default: true, "Do not load the demo catalog into an empty database")
    static let backupDir = Setting<String?>.optionalText(
        "CATALOG_BACKUP_DIR", "Where POST /admin/backups writes copies",
        shownDefault: "backups beside the database")
    static let backupKeep = Setting<Int>.integer(
        "CATALOG_BACKUP_KEEP", default: 7, in: 1...10_000,
        "How many backups the backup folder keeps, the newest; older ones are deleted")
    static let changeRetention = Setting<Duration>.period(
        "CATALOG_CHANGE_RETENTION", default: .seconds(30 * 86_400), shownDefault: "30d",
        "How long the change feed keeps deletions and accepts a sync token, such as 30d, 12h or 3600s")

    static let mediaStore = Setting<String?>.optionalText(
        "CATALOG_MEDIA_STORE",
        "Where images are kept when several servers share a PostgreSQL database: s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION, with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        shownDefault: "--media-directory")
    static let mediaDirectory = Setting<String?>.optionalText(
        "CATALOG_MEDIA_DIRECTORY", "The local folder of images when there is no --media-store", shownDefault: "media beside the database")
    static let imageCacheDirectory = Setting<String?>.optionalText(
        "CATALOG_IMAGE_CACHE_DIRECTORY", "The local folder where image renditions are cached", shownDefault: "image-cache beside the database")
    static let imageCacheSize = Setting<Int>.integer(
        "CATALOG_IMAGE_CACHE_SIZE", default: 1 << 30, in: (1 << 20)...(1 << 50), "Most bytes the rendition cache keeps on disk, least recently used out first")

    static let publicURL = Setting<String?>.optionalText(
        "CATALOG_PUBLIC_URL",
        "The server's absolute URL as clients reach it, such as https://catalog.example.com: a hosted video's streamURL becomes its HLS playlist there",
        shownDefault: "stream URLs left as given")
    static let requireSignedPlayback = SwitchSetting(
        "CATALOG_REQUIRE_SIGNED_PLAYBACK", default: false,
        "Serve hosted video only under expiring signed paths (responses show them); 403 without one")
    static let playbackKeyFile = Setting<String?>.optionalText(
        "CATALOG_PLAYBACK_KEY_FILE", "The key signed playback paths are made with (32 bytes or more, the same on every replica), read again on SIGHUP",
        shownDefault: "a random key made at start")
    static let playbackLifetime = Setting<Duration>.seconds("CATALOG_PLAYBACK_LIFETIME", default: 3600, "Seconds a signed playback path lasts at least")
    static let maxVideoSize = Setting<Int>.integer(
        "CATALOG_MAX_VIDEO_SIZE", default: VideoRules.defaultMaxBytes, in: (1 << 20)...(1 << 40), "Largest video upload in bytes")
    static let videoQuota = Setting<Int>.integer(
        "CATALOG_VIDEO_QUOTA", default: VideoRules.defaultQuotaBytes, in: (1 << 20)...(1 << 44), "Most bytes one user's unfinished video uploads may still need")
    static let videoWorkers = Setting<Int>.integer("CATALOG_VIDEO_WORKERS", default: 1, in: 0...64, "How many videos are processed at once (0: none here)")
    static let videoSpoolDirectory = Setting<String?>.optionalText(
        "CATALOG_VIDEO_SPOOL_DIRECTORY", "The local folder where uploads to an S3 media store are spooled", shownDefault: "video-spool beside the database")

    // MARK: Webhooks

    static let webhookKeyFile = Setting<String?>.optionalText(
        "CATALOG_WEBHOOK_KEY_FILE", "The key webhook signing secrets are sealed with in the database (32 bytes or more, the same on every replica)",
        shownDefault: "webhook.key beside a SQLite database, made on first start")
    static let webhookAllowedNetworks = ListSetting(
        "CATALOG_WEBHOOK_ALLOWED_NETWORKS",
        "A network (CIDR, such as 10.1.0.0/16) webhooks may reach although it is loopback, private, link-local or otherwise internal; repeat or separate with commas",
        shownDefault: "none: only public addresses")
    static let webhookHTTPNetworks = ListSetting(
        "CATALOG_WEBHOOK_HTTP_NETWORKS", "A network (CIDR) webhooks may reach over plain http; repeat or separate with commas", shownDefault: "none: https only")
    static let webhookCAFile = Setting<String?>.optionalText(
        "CATALOG_WEBHOOK_CA_FILE", "A PEM bundle of CAs trusted for webhook receivers besides the system's", shownDefault: "the system's trust store")
    static let webhookTimeout = Setting<Duration>.seconds("CATALOG_WEBHOOK_TIMEOUT", default: 10, "Seconds one webhook attempt may take")
    static let webhookLease = Setting<Duration>.seconds(
        "CATALOG_WEBHOOK_LEASE", default: 60, "Seconds a server's claim on a webhook delivery lasts unless renewed (another server sends it after)")
    static let webhookBacklog = Setting<Int>.integer(
        "CATALOG_WEBHOOK_BACKLOG", default: 10_000, in: 1...1_000_000, "Most webhook messages waiting per endpoint; the oldest past it are dropped")

    // MARK: Identity

    /// What `catalog-server backup` asks the running server with.
    static let apiKey = Setting<String?>.optionalText("CATALOG_API_KEY", "An admin API key")
    static let requireAuthForReads = SwitchSetting(
        "CATALOG_REQUIRE_AUTH_FOR_READS", default: false,
        "Require a credential for reads too; by default anyone reads the public catalog")
    static let jwksFile = Setting<String?>.optionalText(
        "CATALOG_JWKS_FILE", "The identity provider's JWKS file, read again on SIGHUP", after: "; without it identity tokens are refused.")
    static let jwtIssuers = ListSetting("CATALOG_JWT_ISSUERS", "An accepted identity token issuer (iss); repeat for several")
    static let jwtAudiences = ListSetting("CATALOG_JWT_AUDIENCES", "An accepted identity token audience (aud); repeat for several")

    // MARK: Logs

    static let logLevel = Setting<Logger.Level>.choice(
        "CATALOG_LOG_LEVEL", default: .info, from: Logger.Level.allCases.map { ($0.rawValue, $0) },
        "trace, debug, info (one line per request), notice, warning, error or critical")
    static let logFormat = Setting<LogFormat>.choice(
        "CATALOG_LOG_FORMAT", default: .text, from: LogFormat.allCases.map { ($0.rawValue, $0) },
        "text or json, one line per entry on standard output")
}
