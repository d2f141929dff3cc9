import CatalogIdentity
import CatalogMedia
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
    /// A folder of `NNNN_description.sql` migrations to run instead of those the build
    /// carries (``Migration/embedded``, the default).
    public var migrationsDirectory: URL?
    /// Whether to load the demo catalog into an empty database.
    public var seedDemoCatalog = true
    /// Whether the demo catalog, when loaded, gets the pictures it makes for itself.
    public var seedDemoArtwork = true
    /// A file to serve at `GET /openapi.yaml` instead of the document the build carries
    /// (the default).
    public var openAPIDocument: URL?
    /// Whether to log one `request` line per response (at the `info` level).
    public var accessLog = true
    /// Where `POST /admin/backups` writes copies; `backups` beside the database when `nil`.
    public var backupDirectory: String?
    /// How many copies the backup folder keeps (the newest); older ones are deleted.
    public var backupKeep = 7
    /// Whether reads of the catalog need a credential too.
    public var requireAuthForReads = false
    /// How identity tokens from an identity provider are checked; `nil` refuses them all.
    public var identityTokens: IdentityTokenSettings?
    /// Where to serve `/metrics` without credentials, besides the admin-only route (a
    /// loopback address for Prometheus), if anywhere.
    public var metricsListener: (host: String, port: Int)?
    /// The exact origins of browser apps allowed to call the API (CORS); none by default.
    public var corsAllowedOrigins: Set<String> = []
    /// The rate budgets per caller and class of request; `nil` turns rate limits off.
    public var rateLimits: [RateClass: RatePolicy]? = RatePolicy.defaults
    /// The `max-age` in seconds of answers that are the same for every caller (the public
    /// catalog); `nil` (the default): `no-cache`, so clients revalidate with the ETag.
    public var publicMaxAge: Int?
    /// The most bytes all event streams hold unsent together; past it, the streams
    /// furthest behind are cut (their clients resume with `Last-Event-ID`).
    public var maxUnsentStreamBytes = 64 << 20
    /// How long the change feed keeps deletions, and how old a sync token may be before it
    /// gets 410 `syncTokenExpired`.
    public var changeRetention: Duration = .seconds(30 * 86_400)
    /// Where images are kept: `s3://bucket[/prefix]?endpoint=…&region=…` for S3-compatible
    /// storage (credentials from `AWS_*`); `nil` (the default) for ``mediaDirectory``.
    public var mediaStore: String?
    /// Where an S3 media store's credentials are read (`AWS_ACCESS_KEY_ID`, …): the
    /// process's environment when `nil`.
    public var mediaStoreEnvironment: [String: String]?
    /// The local directory of images when there is no ``mediaStore``; `media` beside the
    /// database when `nil`.
    public var mediaDirectory: String?
    /// Where renditions are cached on local disk; `image-cache` beside the database when `nil`.
    public var imageCacheDirectory: String?
    /// The most bytes the rendition cache holds on disk.
    public var imageCacheBytes = 1 << 30
    /// The most bytes of renditions held in memory.
    public var imageMemoryBytes = 64 << 20
    /// How long an image no resource shows is kept before the sweep removes it.
    public var imageGrace: Duration = .seconds(86_400)
    /// The most bytes a member's uploaded images may hold (editors and admins are not limited).
    public var imageQuotaBytes = 100_000_000
    /// The largest video upload, in bytes.
    public var videoMaxBytes = VideoRules.defaultMaxBytes
    /// The most bytes one user's unfinished video uploads may still need.
    public var videoQuotaBytes = VideoRules.defaultQuotaBytes
    /// How many videos are processed at once (each an ffmpeg at the lowest priority).
    public var videoWorkers = 1
    /// Where uploads to an S3 media store are spooled before each part is sent;
    /// `video-spool` beside the database when `nil`.
    public var videoSpoolDirectory: String?
    /// Whether hosted videos' files need a signed path (`--require-signed-playback`):
    /// responses then show media paths with an expiring signature, and a file asked for
    /// without a valid one is a 403.
    public var requireSignedPlayback = false
    /// The file holding the key playback signatures are made with (at least 32 bytes, the
    /// same on every replica; read again on SIGHUP, the previous key staying valid);
    /// `nil`: a random key made at start (and made anew on SIGHUP).
    public var playbackKeyFile: String?
    /// How long a signed media path lasts at least.
    public var playbackLifetime: Duration = .seconds(3600)
    /// The server's absolute URL as clients reach it (`https://catalog.example.com`): a
    /// hosted video's stream URL is its HLS playlist there. `nil` leaves stream URLs as
    /// their items were created with.
    public var publicURL: String?

    /// The file whose bytes (at least 32) make the key that seals webhook signing secrets
    /// in the database; the same on every replica. `nil`: `webhook.key` beside a SQLite
    /// database, made on first start (servers sharing PostgreSQL must name one).
    public var webhookKeyFile: String?
    /// Networks (CIDR) where webhooks may go although their addresses are of a refused
    /// class (loopback, private, link-local, unique-local, metadata, …).
    public var webhookAllowedNetworks: [String] = []
    /// Networks (CIDR) where webhooks may go over plain `http`; none: https only.
    public var webhookHTTPNetworks: [String] = []
    /// A PEM bundle of CAs trusted for webhook receivers besides the system's.
    public var webhookCAFile: String?
    /// How long one webhook attempt may take.
    public var webhookTimeout: Duration = .seconds(10)
    /// The most webhook deliveries that wait per endpoint (the oldest past it are dropped).
    public var webhookBacklog = 10_000
    /// How long a sender's claim on a delivery lasts unless renewed.
    public var webhookLease: Duration = .seconds(60)
    /// Whether webhook messages are made and sent (tests that look at what waits turn it off).
    public var webhookDeliveries = true
    /// The clock webhook attempts are scheduled by (milliseconds since 1970); `nil`: the
    /// system's. Tests move their own.
    public var webhookClock: (@Sendable () -> Int64)?

    /// The defaults above.
    public init() {}
}

/// Where identity tokens' keys come from, and whom they must be from and for.
public struct IdentityTokenSettings: Sendable {
    /// The JWKS file (read at start and on ``CatalogApplication/reloadIdentityKeys()``).
    public var keySetFile: String
    /// The accepted `iss` values.
    public var issuers: [String]
    /// The accepted `aud` values.
    public var audiences: [String]

    /// Settings with these values.
    public init(keySetFile: String, issuers: [String], audiences: [String]) {
        self.keySetFile = keySetFile
        self.issuers = issuers
        self.audiences = audiences
    }

    /// The key set in the file.
    func loadKeys() throws -> KeySet {
        try KeySet(json: Array(try Data(contentsOf: URL(fileURLWithPath: keySetFile))))
    }
}
