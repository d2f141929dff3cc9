#!/usr/bin/env bash
# gzip answers, in one run, on a 10,000-item database (whose change feed has pages of
# 1,000 changes):
#   1. Bytes on the wire, identity and gzip: a 20-item list page, a 1,000-change feed
#      page, the contract.
#   2. What compressing costs the server: list pages from random cursors (kept pages: their
#      gzip is kept too) and feed pages from random positions (each compressed on its
#      first turn), with and without `Accept-Encoding: gzip`, interleaved; req/s and the
#      server's CPU per request.
# Usage: Benchmarks/compression.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3 curl
bench_server
work=$(mktemp -d)
port=18282
ours=
trap '[ -n "$ours" ] && kill $ours 2>/dev/null; rm -rf "$work"' EXIT
"$server" migrate --database "$work/catalog.sqlite" >/dev/null
bench_seed_items "$work/catalog.sqlite" 10000
key=$(bench_admin_key "$server" "$work/catalog.sqlite")
"$server" --port "$port" --loop-threads "${BENCH_WORKERS:-1}" --database "$work/catalog.sqlite" --no-seed --log-level warning --rate-limits off >/dev/null &
ours=$!
bench_wait_port "$port"
base="http://127.0.0.1:$port"

# bytes NAME PATH: the body's bytes in identity and in gzip.
bytes() {
    local plain coded
    plain=$(curl -sf -H "Authorization: Bearer $key" -o /dev/null -w '%{size_download}' "$base$2")
    coded=$(curl -sf -H "Authorization: Bearer $key" -H 'Accept-Encoding: gzip' -o /dev/null -w '%{size_download}' "$base$2")
    printf '  %-34s identity %8s bytes   gzip %8s bytes   (%s)\n' "$1" "$plain" "$coded" "$(bench_ratio "$coded" "$plain")"
}
echo "Bytes on the wire"
bytes "list page (20 items)" "/v1/playable-items?limit=20"
bytes "feed page (1,000 changes)" "/v1/changes?limit=1000"
bytes "contract (/openapi.yaml)" "/openapi.yaml"

# Random list pages and feed positions, the same for both codings.
cursor=""
: > "$work/cursors.txt"
for _ in $(seq 1 200); do
    echo "$cursor" >> "$work/cursors.txt"
    cursor=$(curl -sf "$base/v1/playable-items?limit=20${cursor:+&cursor=$cursor}" | grep -o '"nextCursor":"[^"]*"' | cut -d'"' -f4 || true)
    [ -n "$cursor" ] || break
done
since=""
: > "$work/since.txt"
for _ in $(seq 1 100); do
    page=$(curl -sf -H "Authorization: Bearer $key" "$base/v1/changes?limit=50${since:+&since=$since}")
    since=$(grep -o '"nextToken":"[^"]*"' <<<"$page" | cut -d'"' -f4 || true)
    [ -n "$since" ] || break
    echo "$since" >> "$work/since.txt"
done
script() { # script NAME LIST PATH-PREFIX PARAMETER [HEADER]
    {
        echo "values = {"; sed 's/.*/"&",/' "$2"; echo "}"
        echo "wrk.headers[\"Authorization\"] = \"Bearer $key\""
        [ -n "${5:-}" ] && echo "wrk.headers[\"Accept-Encoding\"] = \"$5\""
        echo "request = function() local v = values[math.random(#values)]; local p = \"$3\"; if v ~= \"\" then p = p .. \"&$4=\" .. v end; return wrk.format(\"GET\", p) end"
    } > "$work/$1.lua"
}
script list-plain "$work/cursors.txt" "/v1/playable-items?limit=20" cursor
script list-gzip "$work/cursors.txt" "/v1/playable-items?limit=20" cursor gzip
script feed-plain "$work/since.txt" "/v1/changes?limit=1000" since
script feed-gzip "$work/since.txt" "/v1/changes?limit=1000" since gzip
for kind in list feed; do
    # One caller's feed reads share the pool with others: a few at a time, not 32.
    [ $kind = feed ] && BENCH_CONNECTIONS=2
    echo "$kind pages, identity against gzip"
    BENCH_DURATION=3s bench_wrk "  (warm-up)" "$base/" "$work/$kind-plain.lua" >/dev/null
    BENCH_DURATION=3s bench_wrk "  (warm-up)" "$base/" "$work/$kind-gzip.lua" >/dev/null
    for _ in $(seq 1 "${BENCH_ROUNDS:-2}"); do
        bench_wrk "  identity" "$base/" "$work/$kind-plain.lua" "$ours"
        bench_wrk "  gzip" "$base/" "$work/$kind-gzip.lua" "$ours"
    done
done
echo "Peak RSS: $(bench_rss "$ours")"
