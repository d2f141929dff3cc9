// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Catalog",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .executable(name: "catalog-server", targets: ["catalog-server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // Sockets, event loops, the HTTP/1.1 parser and writer, and the router.
        // Knows nothing of the catalog.
        .target(name: "HTTPServer", dependencies: ["CLinux"]),
        // epoll and eventfd headers for Swift.
        .target(name: "CLinux"),
        // Wiring: routes, handlers and error mapping for the catalog service.
        .target(name: "CatalogService", dependencies: ["HTTPServer"]),
        // Thin executable: parse configuration, start, wait for a signal.
        .executableTarget(
            name: "catalog-server",
            dependencies: [
                "CatalogService",
                "HTTPServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer"]),
        .testTarget(name: "CatalogServiceTests", dependencies: ["CatalogService", "HTTPServer"]),
    ],
    swiftLanguageModes: [.v6]
)
