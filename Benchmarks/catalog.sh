#!/usr/bin/env bash
# The catalog's hot paths on a 10,000-item database, each beside nginx serving
# byte-identical bodies from static files (same worker count, keep-alive), in one run:
#   1. GET /v1/playable-items/{random id}
#   2. GET /v1/playable-items?limit=20&cursor={random page}
#   3. POST /v1/playable-items (every 201 durable: WAL, synchronous=FULL, group commit)
#      vs nginx serving a static response of the same size.
#   4. GET /v1/playable-items/{random id} with an API key vs without (target: within 10%).
# Usage: Benchmarks/catalog.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2 BENCH_WORKERS=1 BENCH_ITEMS=10000;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead, e.g. an earlier commit's)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3
bench_server
items=${BENCH_ITEMS:-10000}

work=$(mktemp -d)
database="$work/catalog.sqlite"
ours_port=18280 nginx_port=18281
ours=
trap '[ -n "$ours" ] && kill $ours 2>/dev/null; bench_nginx_stop "$work"; rm -rf "$work"' EXIT

"$server" migrate --database "$database" >/dev/null
bench_seed_items "$database" "$items"
sqlite3 "$database" "SELECT id FROM playable_items" > "$work/ids.txt"
key=$(bench_admin_key "$server" "$database")

"$server" --port "$ours_port" --loop-threads "$BENCH_WORKERS" --database "$database" --no-seed --log-level warning --rate-limits off >/dev/null &
ours=$!
bench_wait_port "$ours_port"

# Static copies of exactly what our server answers, for nginx.
mkdir -p "$work/static/v1/playable-items" "$work/static/pages"
sed "s|.*|url = \"http://127.0.0.1:$ours_port/v1/playable-items/&\"\noutput = \"$work/static/v1/playable-items/&\"|" "$work/ids.txt" > "$work/fetch.conf"
curl -sf -K "$work/fetch.conf"
cursor=""
: > "$work/cursors.txt"
for page in $(seq 1 $((items / 20))); do
    url="http://127.0.0.1:$ours_port/v1/playable-items?limit=20${cursor:+&cursor=$cursor}"
    curl -sf "$url" -o "$work/static/pages/$page"
    echo "$cursor" >> "$work/cursors.txt"
    cursor=$(grep -o '"nextCursor":"[^"]*"' "$work/static/pages/$page" | cut -d'"' -f4 || true)
    [ -n "$cursor" ] || break
done
curl -sf -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $key" -d "$BENCH_POST_BODY" "http://127.0.0.1:$ours_port/v1/playable-items" -o "$work/static/created"

bench_nginx "$work" "$nginx_port" "/v1/playable-items/ $work/static application/json" "/pages/ $work/static application/json" \
    "/created $work/static/created application/json"

# wrk scripts: the same random choice of resource for both servers.
{
    echo "ids = {"; sed 's/.*/"&",/' "$work/ids.txt"; echo "}"
    echo 'request = function() return wrk.format("GET", "/v1/playable-items/" .. ids[math.random(#ids)]) end'
} > "$work/get.lua"
{ echo "wrk.headers[\"Authorization\"] = \"Bearer $key\""; cat "$work/get.lua"; } > "$work/get-key.lua"
pages=$(wc -l < "$work/cursors.txt")
{
    echo "cursors = {"; sed 's/.*/"&",/' "$work/cursors.txt"; echo "}"
    echo 'request = function()'
    echo '  local c = cursors[math.random(#cursors)]'
    echo '  if c == "" then return wrk.format("GET", "/v1/playable-items?limit=20") end'
    echo '  return wrk.format("GET", "/v1/playable-items?limit=20&cursor=" .. c) end'
} > "$work/list.lua"
echo "request = function() return wrk.format(\"GET\", \"/pages/\" .. math.random($pages)) end" > "$work/pages.lua"
bench_post_script "$work/post.lua" "$key"

bench_same_body "http://127.0.0.1:$ours_port/v1/playable-items/$(head -1 "$work/ids.txt")" "http://127.0.0.1:$nginx_port/v1/playable-items/$(head -1 "$work/ids.txt")"
bench_same_body "http://127.0.0.1:$ours_port/v1/playable-items?limit=20" "http://127.0.0.1:$nginx_port/pages/1"

echo "database: $items playable items, $pages list pages; workers: $BENCH_WORKERS each; wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION, ${BENCH_ROUNDS:-2} rounds"

bench_scenario "GET /v1/playable-items/{random id}" 75% \
    "http://127.0.0.1:$ours_port" "$work/get.lua" "http://127.0.0.1:$nginx_port" "$work/get.lua"
bench_scenario "GET /v1/playable-items?limit=20&cursor={random page}" 65% \
    "http://127.0.0.1:$ours_port" "$work/list.lua" "http://127.0.0.1:$nginx_port" "$work/pages.lua"
bench_scenario "POST /v1/playable-items (each 201 durable) vs a same-sized static GET" 30% \
    "http://127.0.0.1:$ours_port/v1/playable-items" "$work/post.lua" "http://127.0.0.1:$nginx_port/created"

# The same GET with and without an API key, interleaved: what checking a key costs
# (after its first use it is checked from memory, by a keyed SipHash of the token).
echo "GET /v1/playable-items/{random id}: with an API key vs anonymous"
BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:$ours_port" "$work/get-key.lua" >/dev/null
ratios=() keyed_cpu=() anonymous_cpu=()
for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
    bench_wrk "  with a key" "http://127.0.0.1:$ours_port" "$work/get-key.lua" "$ours"; keyed=$BENCH_RPS; keyed_cpu+=("$BENCH_CPU_US")
    bench_wrk "  anonymous" "http://127.0.0.1:$ours_port" "$work/get.lua" "$ours"; anonymous=$BENCH_RPS; anonymous_cpu+=("$BENCH_CPU_US")
    ratios+=("$(awk -v a="$keyed" -v b="$anonymous" 'BEGIN { printf "%.1f", 100 * a / b }')")
done
echo "  keyed/anonymous: $(printf '%s%% ' "${ratios[@]}")-> mean $(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.1f%%", s / NR }')   (target ≥ 90%)"
echo "  CPU per request: with a key $(printf '%s\n' "${keyed_cpu[@]}" | awk '{ s += $1 } END { printf "%.1f", s / NR }') µs, anonymous $(printf '%s\n' "${anonymous_cpu[@]}" | awk '{ s += $1 } END { printf "%.1f", s / NR }') µs"

echo "peak RSS: catalog-server $(bench_rss $ours) (target ≤ 40 MiB: 40960 kB), nginx $(bench_nginx_rss "$work")"
