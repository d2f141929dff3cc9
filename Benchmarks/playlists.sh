#!/usr/bin/env bash
# Playlists, in one run:
#   1. GET /v1/playlists/{random id}?include=entries for 50-entry playlists (one response
#      with the playlist and its 50 entries, each embedding its playable item), beside
#      nginx serving byte-identical bodies from static files (same worker count, keep-alive).
#   2. Reordering a 10,000-entry playlist: PATCH …/entries/{entryId} moving one entry
#      between the ends (every move shifts 9,999 positions), one client at a time, so
#      wrk's latency percentiles are the per-move cost; and PUT …/entries alternating a
#      10,000-id order with its reverse. Every answer is durable (synchronous=FULL).
# Usage: Benchmarks/playlists.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2 BENCH_WORKERS=1)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3
command -v jq >/dev/null || apt-get install -y -qq jq >/dev/null
bench_server
items=1000 playlists=100

work=$(mktemp -d)
database="$work/catalog.sqlite"
ours_port=18380 nginx_port=18381
ours=
trap '[ -n "$ours" ] && kill $ours 2>/dev/null; bench_nginx_stop "$work"; rm -rf "$work"' EXIT

"$server" migrate --database "$database" >/dev/null
bench_seed_items "$database" "$items"
sqlite3 "$database" "SELECT id FROM playable_items" > "$work/items.txt"
key=$(bench_admin_key "$server" "$database")

"$server" --port "$ours_port" --loop-threads "$BENCH_WORKERS" --database "$database" --no-seed --log-level warning --rate-limits off >/dev/null &
ours=$!
bench_wait_port "$ours_port"
base="http://127.0.0.1:$ours_port"

# 100 playlists of 50 random items each, through the API.
mkdir -p "$work/static/v1/playlists"
: > "$work/playlists.txt"
for i in $(seq 1 $playlists); do
    id=$(curl -sf -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $key" -d "{\"title\":\"Playlist $i\",\"description\":\"Fifty videos.\"}" \
        "$base/v1/playlists" | jq -r .id)
    shuf -n 50 "$work/items.txt" | jq -R . | jq -sc '{playableItemIds: .}' \
        | curl -sf -X PUT -H 'Content-Type: application/json' -H "Authorization: Bearer $key" --data-binary @- "$base/v1/playlists/$id/entries" >/dev/null
    curl -sf "$base/v1/playlists/$id?include=entries" -o "$work/static/v1/playlists/$id"
    echo "$id" >> "$work/playlists.txt"
done
first=$(head -1 "$work/playlists.txt")
[ "$(jq '.entries.items | length' "$work/static/v1/playlists/$first")" = 50 ] || { echo "expected 50 embedded entries" >&2; exit 1; }

bench_nginx "$work" "$nginx_port" "/v1/playlists/ $work/static application/json"
bench_same_body "$base/v1/playlists/$first?include=entries" "http://127.0.0.1:$nginx_port/v1/playlists/$first"
{
    echo "ids = {"; sed 's/.*/"&",/' "$work/playlists.txt"; echo "}"
    echo 'request = function() return wrk.format("GET", "/v1/playlists/" .. ids[math.random(#ids)] .. "?include=entries") end'
} > "$work/ours.lua"
{
    echo "ids = {"; sed 's/.*/"&",/' "$work/playlists.txt"; echo "}"
    echo 'request = function() return wrk.format("GET", "/v1/playlists/" .. ids[math.random(#ids)]) end'
} > "$work/nginx.lua"

echo "$playlists playlists of 50 entries over $items items ($(stat -c %s "$work/static/v1/playlists/$first") bytes each);" \
    "workers: $BENCH_WORKERS each; wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION, ${BENCH_ROUNDS:-2} rounds"
echo "GET /v1/playlists/{random id}?include=entries"
BENCH_DURATION=5s bench_wrk "  (warm-up)" "$base" "$work/ours.lua" >/dev/null
BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:$nginx_port" "$work/nginx.lua" >/dev/null
ratios=()
for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
    bench_wrk "  catalog-server" "$base" "$work/ours.lua" "$ours"; a=$BENCH_RPS
    # shellcheck disable=SC2046
    bench_wrk "  nginx" "http://127.0.0.1:$nginx_port" "$work/nginx.lua" $(bench_nginx_pids "$work"); b=$BENCH_RPS
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", 100 * a / b }')")
done
echo "  ours/nginx: $(printf '%s%% ' "${ratios[@]}")-> mean $(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.1f%%", s / NR }')   (target 15%)"

# A 10,000-entry playlist.
long=$(curl -sf -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $key" -d '{"title":"Ten thousand"}' "$base/v1/playlists" | jq -r .id)
for _ in $(seq 1 10); do cat "$work/items.txt"; done | jq -R . | jq -sc '{playableItemIds: .}' > "$work/forward.json"
jq -c '{playableItemIds: (.playableItemIds | reverse)}' "$work/forward.json" > "$work/reverse.json"
curl -sf -X PUT -H 'Content-Type: application/json' -H "Authorization: Bearer $key" --data-binary @"$work/forward.json" "$base/v1/playlists/$long/entries" | jq -e '.entryCount == 10000' >/dev/null
entry=$(curl -sf "$base/v1/playlists/$long/entries?limit=1" | jq -r '.items[0].entryId')
cat > "$work/move.lua" <<LUA
local i = 0
request = function()
  i = i + 1
  local position = (i % 2 == 1) and 9999 or 0
  return wrk.format("PATCH", "/v1/playlists/$long/entries/$entry", {["Content-Type"] = "application/merge-patch+json", ["Authorization"] = "Bearer $key"},
                    '{"position":' .. position .. '}')
end
LUA
{
    echo "local bodies = {}"
    echo "bodies[1] = [[$(cat "$work/reverse.json")]]"
    echo "bodies[0] = [[$(cat "$work/forward.json")]]"
    echo 'local i = 0'
    echo 'request = function()'
    echo '  i = i + 1'
    echo "  return wrk.format(\"PUT\", \"/v1/playlists/$long/entries\", {[\"Content-Type\"] = \"application/json\"}, bodies[i % 2])"
    echo 'end'
} > "$work/replace.lua"
echo "Reordering a 10,000-entry playlist, one client (latency per durable change; target p99 < 50 ms)"
BENCH_CONNECTIONS=1 bench_wrk "  PATCH move first<->last" "$base" "$work/move.lua" "$ours"
BENCH_CONNECTIONS=1 bench_wrk "  PUT whole order reversed" "$base" "$work/replace.lua" "$ours"
final=$(curl -sf "$base/v1/playlists/$long/entries?limit=100&fields=id" | jq '[.items[].position] == [range(0;100)]')
echo "  positions dense afterwards: $final; entryCount $(curl -sf "$base/v1/playlists/$long" | jq .entryCount)"

echo "peak RSS: catalog-server $(bench_rss $ours), nginx $(bench_nginx_rss "$work")"
