// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Catalog",
    // What apps need to use CatalogModels and CatalogClient (`Duration` and `Task.sleep(for:)`
    // set the floor); the server's targets build on Linux only and ignore these.
    platforms: [.iOS(.v16), .macOS(.v13), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "CatalogModels", targets: ["CatalogModels"]),
        .library(name: "CatalogClient", targets: ["CatalogClient"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .executable(name: "catalog-server", targets: ["catalog-server"]),
        .executable(name: "catalog", targets: ["catalog"]),
    ],
    // `Server` (on by default) brings the server's dependencies. An app that adds only
    // CatalogModels or CatalogClient can turn it off (`traits: []`): SwiftPM then neither
    // resolves nor fetches swift-argument-parser, GRDB or swift-log for it.
    traits: [
        .trait(name: "Server", description: "The server, its command-line tools and their dependencies."),
        .default(enabledTraits: ["Server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // Shared wire types (Foundation only): what client apps import.
        .target(name: "CatalogModels"),
        // Async client library over URLSession, built on the shared models only.
        .target(name: "CatalogClient", dependencies: ["CatalogModels"]),
        // Each resource declared once — fields, columns, kinds, rules (from CatalogModels),
        // sorting and search — with the strict JSON reader and the document reader built on it.
        .target(name: "CatalogSchema", dependencies: ["CatalogModels"]),
        // Sockets, event loops, the HTTP/1.1 parser and writer, and the router.
        // Knows nothing of the catalog.
        .target(name: "HTTPServer", dependencies: ["CLinux", "CTLS", "CZlib"]),
        // epoll and eventfd headers for Swift.
        .target(name: "CLinux"),
        // zlib (zlib1g-dev): gzip response bodies, on a deflate state per thread.
        .target(name: "CZlib", linkerSettings: [.linkedLibrary("z")]),
        // OpenSSL's libssl (libssl-dev): the TLS settings and the macros Swift cannot call.
        .target(name: "CTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // Search functions for SQLite (libsqlite3-dev) on FTS5's own tokenizer: a match and
        // a rank computed from a row's text, for searches that match most of a large catalog.
        .target(name: "CSQLite", linkerSettings: [.linkedLibrary("sqlite3")]),
        // libpq (libpq-dev's header), loaded only when a PostgreSQL database is opened.
        .target(name: "CPostgres"),
        // OpenSSL's libcrypto (libssl-dev), found with pkg-config.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // What the catalog asks of libvips (libvips-dev), behind a C interface free of glib's
        // types: a header's size, a rendition, a small picture's pixels; only four loaders may
        // run. glib's headers are named here, not found with pkg-config, whose `-pthread`
        // SwiftPM refuses with a warning on every build.
        .target(
            name: "CImage",
            cSettings: [
                .unsafeFlags([
                    "-I/usr/include/glib-2.0", "-I/usr/lib/x86_64-linux-gnu/glib-2.0/include", "-I/usr/lib/aarch64-linux-gnu/glib-2.0/include",
                ])
            ],
            // libvips is loaded at first use (dlopen), not linked: see image.c.
            linkerSettings: [.linkedLibrary("dl")]),
        // libcurl (libcurl4-openssl-dev): one signed exchange with S3-compatible storage.
        // libcurl is loaded at first use (dlopen), not linked: see curl.c.
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("dl")]),
        // Requests the server makes to others' servers (webhook deliveries): which addresses
        // it may reach, and many POSTs at once through libcurl, each socket checked first.
        .target(name: "CatalogOutbound", dependencies: ["CCurl"]),
        // Images and video without HTTP or a database: the formats told from their bytes,
        // uploads checked and normalized, renditions, BlurHash, ffprobe and ffmpeg run with
        // limits, and where the bytes are kept (the media store: a local directory, or
        // S3-compatible object storage).
        .target(name: "CatalogMedia", dependencies: ["CCurl", "CImage", "CLinux", "CatalogIdentity", "CatalogModels", "CatalogSchema"]),
        // Credentials without HTTP or storage: API key secrets, SHA-256, constant-time
        // comparison, and JWT verification against a JWKS, all on libcrypto.
        .target(name: "CatalogIdentity", dependencies: ["CCrypto", "CatalogSchema"]),
        // The generic resource store derived from the declarations, entries, comments,
        // accounts, imports and the demo catalog, written once over a small SQL-engine seam
        // (Engine/): SQLite through GRDB (the embedded default, a group-committing writer)
        // and PostgreSQL through libpq (for several servers on one database).
        // Its migrations (Migrations/) are built in by the EmbedFiles plugin.
        .target(
            name: "CatalogStore",
            dependencies: [
                "CLinux",
                "CPostgres",
                "CSQLite",
                "CatalogIdentity",
                "CatalogModels",
                "CatalogSchema",
                .product(name: "GRDB", package: "GRDB.swift", condition: .when(traits: ["Server"])),
                .product(name: "GRDBSQLite", package: "GRDB.swift", condition: .when(traits: ["Server"])),
            ],
            plugins: ["EmbedFiles"]
        ),
        // Wiring: routes, handlers and error mapping for the catalog service; its contract
        // (openapi.yaml) is built in by the EmbedFiles plugin.
        .target(
            name: "CatalogService",
            dependencies: [
                "CLinux", "CatalogIdentity", "CatalogMedia", "CatalogModels", "CatalogOutbound", "CatalogSchema", "CatalogStore", "HTTPServer",
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Server"])),
            ],
            plugins: ["EmbedFiles"]
        ),
        // Carries Migrations/ and openapi.yaml into the binary at build time (nothing
        // generated is kept in git), with the tool that writes them as Swift sources.
        .plugin(name: "EmbedFiles", capability: .buildTool(), dependencies: ["embed-files"]),
        .executableTarget(name: "embed-files"),
        // Thin executable: parse configuration, start, wait for a signal.
        .executableTarget(
            name: "catalog-server",
            dependencies: [
                "CTLS",
                "CatalogIdentity",
                "CatalogModels",
                "CatalogService",
                "CatalogStore",
                "CLinux",
                "HTTPServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: .when(traits: ["Server"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Server"])),
            ]
        ),
        // The command-line client, on the client library.
        .executableTarget(
            name: "catalog",
            dependencies: ["CatalogClient", "CatalogModels", .product(name: "ArgumentParser", package: "swift-argument-parser", condition: .when(traits: ["Server"]))]
        ),
        // What several test targets share: a seeded random generator, raw loopback sockets,
        // child processes, test certificates made with the openssl CLI and a TLS client.
        .target(name: "TestSupport", dependencies: ["CCrypto", "CLinux", "CTLS"], path: "Tests/TestSupport"),
        .testTarget(name: "CatalogModelsTests", dependencies: ["CatalogModels"]),
        .testTarget(name: "CatalogSchemaTests", dependencies: ["CatalogSchema", "CatalogModels", "TestSupport"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "TestSupport"]),
        .testTarget(name: "CatalogMediaTests", dependencies: ["CatalogMedia", "CatalogModels"]),
        .testTarget(
            name: "CatalogStoreTests",
            dependencies: [
                "CatalogStore", "CatalogSchema", "CatalogModels", "CSQLite", "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift", condition: .when(traits: ["Server"])),
                .product(name: "GRDBSQLite", package: "GRDB.swift", condition: .when(traits: ["Server"])),
            ]
        ),
        // What the API, client, executable and replica tests share: a catalog served on a
        // loopback port over either engine, an HTTP client, child server processes.
        .target(
            name: "ServiceTestSupport",
            dependencies: [
                "CatalogService", "CatalogStore", "CatalogMedia", "CatalogModels", "CatalogClient", "CatalogIdentity", "HTTPServer", "TestSupport",
            ],
            path: "Tests/ServiceTestSupport"
        ),
        // The API through a served catalog: routes, access, caching, the feed, the contract.
        .testTarget(
            name: "CatalogAPITests",
            dependencies: [
                "ServiceTestSupport", "CatalogService", "CatalogSchema", "CatalogStore", "CatalogMedia", "CatalogModels", "CatalogClient", "CatalogIdentity",
                "CatalogOutbound", "HTTPServer", "TestSupport", .product(name: "GRDB", package: "GRDB.swift", condition: .when(traits: ["Server"])),
            ]
        ),
        // The client library (CatalogClient, CatalogSync, exports) against a served catalog.
        .testTarget(
            name: "CatalogClientTests",
            dependencies: ["ServiceTestSupport", "CatalogService", "CatalogStore", "CatalogModels", "CatalogClient", "TestSupport"]
        ),
        // The executables as users run them: catalog-server's subcommands, TLS, the CLI.
        .testTarget(
            name: "CatalogExecutableTests",
            dependencies: ["ServiceTestSupport", "CatalogService", "CatalogStore", "CatalogModels", "CatalogClient", "CatalogIdentity", "HTTPServer", "TestSupport"]
        ),
        // Two catalog-server processes on one PostgreSQL database.
        .testTarget(
            name: "CatalogReplicaTests",
            dependencies: [
                "ServiceTestSupport", "CatalogService", "CatalogStore", "CatalogMedia", "CatalogIdentity", "CatalogModels", "CatalogClient", "TestSupport",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
