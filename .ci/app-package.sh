#!/usr/bin/env bash
# What an app pulls in: a package that adds CatalogClient with the `Server` trait off (as
# README shows) resolves no other package, builds, and uses the client and the models.
# (Linux here; the manifest is the one an iOS app's package would have.)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
identity=$(basename "$root" | tr '[:upper:]' '[:lower:]')
app=$(mktemp -d)
trap 'rm -rf "$app"' EXIT
mkdir -p "$app/Sources/App"
cat > "$app/Package.swift" <<MANIFEST
// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.iOS(.v16), .macOS(.v13)],
    dependencies: [.package(path: "$root", traits: [])],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "CatalogClient", package: "$identity")])]
)
MANIFEST
cat > "$app/Sources/App/main.swift" <<'SOURCE'
import CatalogClient
import CatalogModels
import Foundation

let client = CatalogClient(baseURL: URL(fileURLWithPath: "/"))
let errors = GameInput(name: "", imageName: "frogger").validationErrors()
print("client for \(client.baseURL.path), \(errors.count) rule broken")
SOURCE
swift build --package-path "$app" 2>&1 | tail -1
if [ -e "$app/Package.resolved" ] && grep -q '"identity"' "$app/Package.resolved"; then
    echo "an app without the Server trait resolved other packages:" >&2
    grep '"identity"' "$app/Package.resolved" >&2
    exit 1
fi
output=$("$(swift build --package-path "$app" --show-bin-path)/App")
[ "$output" = "client for /, 1 rule broken" ] || { echo "the app printed '$output'" >&2; exit 1; }
echo "app package: CatalogClient alone, no other package resolved"
