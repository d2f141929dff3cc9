#!/usr/bin/env bash
# HTTPS beside nginx, with the same certificate (ECDSA P-256, made by .ci/certificate.sh),
# the same TLS settings (Mozilla intermediate, tickets, no session cache) and the
# same bodies, in one interleaved run:
#   1. keep-alive GET /v1/playable-items/{random id} over TLS (target: 40% of nginx);
#   2. new TLS handshakes: every request on a fresh connection, no resumption (wrk does
#      not resume sessions), GET /healthz (target: 50% of nginx);
#   and, for comparison in the same run, 1. in plaintext (a second catalog-server on a copy
#   of the database, a second nginx on the same files).
# Usage: Benchmarks/tls.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2 BENCH_WORKERS=1 BENCH_ITEMS=10000;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3 openssl
bench_server
items=${BENCH_ITEMS:-10000}

work=$(mktemp -d)
database="$work/catalog.sqlite"
ours_port=18380 nginx_port=18381 plain_port=18382 nginx_plain_port=18383
ours= plain=
trap '[ -n "$ours" ] && kill $ours 2>/dev/null; [ -n "$plain" ] && kill $plain 2>/dev/null; bench_nginx_stop "$work"; bench_nginx_stop "$work/plain"
      rm -rf "$work"' EXIT

# A CA and a server certificate for localhost, as an operator would deploy them.
bash .ci/certificate.sh "$work"
export BENCH_CA="$work/ca.pem"

"$server" migrate --database "$database" >/dev/null
bench_seed_items "$database" "$items"
sqlite3 "$database" "SELECT id FROM playable_items" > "$work/ids.txt"
mkdir -p "$work/plain"
cp "$database" "$work/plain/catalog.sqlite"
"$server" --port "$plain_port" --loop-threads "$BENCH_WORKERS" --database "$work/plain/catalog.sqlite" --no-seed --log-level warning \
    --rate-limits off >/dev/null &
plain=$!

"$server" --port "$ours_port" --loop-threads "$BENCH_WORKERS" --database "$database" --no-seed --log-level warning --rate-limits off \
    --tls-certificate "$work/server.pem" --tls-private-key "$work/server.key" >/dev/null &
ours=$!
bench_wait_port "$ours_port"
bench_wait_port "$plain_port"

mkdir -p "$work/static/v1/playable-items"
sed "s|.*|url = \"https://localhost:$ours_port/v1/playable-items/&\"\noutput = \"$work/static/v1/playable-items/&\"|" "$work/ids.txt" > "$work/fetch.conf"
curl -sf --cacert "$BENCH_CA" -K "$work/fetch.conf"
printf 'ok' > "$work/static/healthz"
BENCH_NGINX_TLS="$work/server.pem $work/server.key" bench_nginx "$work" "$nginx_port" \
    "/v1/playable-items/ $work/static application/json" "/healthz $work/static/healthz text/plain;charset=utf-8"
bench_nginx "$work/plain" "$nginx_plain_port" "/v1/playable-items/ $work/static application/json"

{
    echo "ids = {"; sed 's/.*/"&",/' "$work/ids.txt"; echo "}"
    echo 'request = function() return wrk.format("GET", "/v1/playable-items/" .. ids[math.random(#ids)]) end'
} > "$work/get.lua"
echo 'wrk.headers["Connection"] = "close"' > "$work/handshake.lua"

first=$(head -1 "$work/ids.txt")
bench_same_body "https://localhost:$ours_port/v1/playable-items/$first" "https://localhost:$nginx_port/v1/playable-items/$first"
bench_same_body "https://localhost:$ours_port/healthz" "https://localhost:$nginx_port/healthz"
echo "TLS: $(openssl s_client -connect "127.0.0.1:$ours_port" -servername localhost </dev/null 2>/dev/null | grep -m1 -o 'TLSv1.3, Cipher is [A-Z0-9_]*') (ours; nginx the same)"
echo "database: $items playable items; workers: $BENCH_WORKERS each; wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION, ${BENCH_ROUNDS:-2} rounds"

tls_ours=$ours tls_work=$work
ours=$plain work="$work/plain"
bench_scenario "keep-alive plaintext GET /v1/playable-items/{random id} (for comparison)" "the same as over TLS" \
    "http://127.0.0.1:$plain_port" "$tls_work/get.lua" "http://127.0.0.1:$nginx_plain_port" "$tls_work/get.lua"
ours=$tls_ours work=$tls_work
bench_scenario "keep-alive HTTPS GET /v1/playable-items/{random id}" 40% \
    "https://localhost:$ours_port" "$work/get.lua" "https://localhost:$nginx_port" "$work/get.lua"
bench_scenario "new TLS handshakes: GET /healthz, Connection: close, no resumption" 50% \
    "https://localhost:$ours_port/healthz" "$work/handshake.lua" "https://localhost:$nginx_port/healthz" "$work/handshake.lua"

echo "peak RSS: catalog-server $(bench_rss $ours), nginx $(bench_nginx_rss "$work")"
