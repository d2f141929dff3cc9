#!/usr/bin/env bash
# Runs every example against a fresh server (demo catalog, temporary database, an admin's
# API key in CATALOG_API_KEY) and compares what each prints with expected/*.txt. Used by CI.
# Usage: Examples/curl/test.sh [path/to/catalog-server]   (default .build/debug/catalog-server)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
server=$(realpath "${1:-$root/.build/debug/catalog-server}")
cd "$root/Examples/curl"
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

# The examples write as the first admin, created offline before the server holds the
# database (catalog-server keys create prints only the key); comments show its name.
# CATALOG_DATABASE may name an empty PostgreSQL database instead of the temporary file.
database=${CATALOG_DATABASE:-$work/catalog.sqlite}
CATALOG_API_KEY=$("$server" keys create --role admin --name Ana --database "$database" --migrations ../../Migrations)
export CATALOG_API_KEY

"$server" --port 0 --database "$database" --migrations ../../Migrations > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "${port:-}" ] || { cat "$work/server.log"; echo "the server did not start" >&2; exit 1; }
export CATALOG_URL="http://127.0.0.1:$port"

passed=0 failed=0
check() {
    local name=$1; shift
    if diff -u "expected/$name.txt" <("$@" 2>&1); then
        passed=$((passed + 1))
    else
        echo "FAILED: $*" >&2
        failed=$((failed + 1))
    fi
}
check list-items ./list-items.sh 5
check search ./search.sh bunny
check game-conditional-update ./game-conditional-update.sh
check locations-near ./locations-near.sh 48.8566 2.3522 1000000
check playlist-reorder ./playlist-reorder.sh 3
check comments ./comments.sh "tears of steel"
echo "curl: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
