#!/usr/bin/env bash
# The catalog at 1,000,000 playable items, in one run (issue 16's scale targets):
#   1. GET /v1/playable-items/{random id}: p50, beside the same on a 10,000-item catalog
#      (target: within 1.3×).
#   2. Every list, sort and search of playable items, each over random pages among the
#      first ones (keyset pages cost the same at any depth): p50 and p99 (target: p99 ≤ 50 ms),
#      searches for a word in every title ranked by relevance, and their next pages, included.
#   3. With SCALE_IMPORT=1: `catalog import` of every item (from `catalog export` of the
#      large catalog) into an empty server, and how long it takes.
# Usage: Benchmarks/scale.sh   (env: SCALE_ITEMS=1000000 BENCH_DURATION=10s SCALE_PAGES=100 SCALE_IMPORT=0)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3
bench_server
cli=$(bench_build catalog)
items=${SCALE_ITEMS:-1000000}
pages=${SCALE_PAGES:-100}
work=$(mktemp -d)
pids=()
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# start NAME COUNT PORT: a server on a fresh database of COUNT items; sets $pid and $key.
start() {
    local database="$work/$1.sqlite" began
    "$server" migrate --database "$database" >/dev/null
    began=$(date +%s.%N)
    bench_seed_items "$database" "$2"
    echo "seeded $2 items in $(awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s ($(du -h "$database" | cut -f1) on disk)"
    sqlite3 "$database" "SELECT id FROM playable_items ORDER BY random() LIMIT 10000" > "$work/$1-ids.txt"
    key=$(bench_admin_key "$server" "$database")
    "$server" --port "$3" --database "$database" --no-seed --log-level warning --rate-limits off >/dev/null &
    pid=$!
    pids+=("$pid")
    bench_wait_port "$3"
}

# get_script NAME: a wrk script of random GETs by id from NAME's ids.
get_script() {
    { echo "ids = {"; sed 's/.*/"&",/' "$work/$1-ids.txt"; echo "}"
      echo 'request = function() return wrk.format("GET", "/v1/playable-items/" .. ids[math.random(#ids)]) end'; } > "$work/$1-get.lua"
}

start small 10000 18480; small_pid=$pid
start large "$items" 18481; large_pid=$pid large_key=$key
get_script small; get_script large

echo "1. GET by id, wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION"
BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:18480" "$work/small-get.lua" >/dev/null
BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:18481" "$work/large-get.lua" >/dev/null
bench_wrk "  10,000 items" "http://127.0.0.1:18480" "$work/small-get.lua" "$small_pid"
bench_wrk "  $items items" "http://127.0.0.1:18481" "$work/large-get.lua" "$large_pid"
kill "$small_pid"

# list TITLE QUERY: wrk over the first $pages pages of /v1/playable-items?QUERY.
list() {
    local title=$1 query=$2 cursor="" file="$work/cursors.txt"
    : > "$file"
    for _ in $(seq 1 "$pages"); do
        echo "$cursor" >> "$file"
        cursor=$(curl -sf "http://127.0.0.1:18481/v1/playable-items?limit=20&$query${cursor:+&cursor=$cursor}" | grep -o '"nextCursor":"[^"]*"' | cut -d'"' -f4 || true)
        [ -n "$cursor" ] || break
    done
    {
        echo "cursors = {"; sed 's/.*/"&",/' "$file"; echo "}"
        echo 'request = function()'
        echo '  local c = cursors[math.random(#cursors)]'
        echo "  if c == \"\" then return wrk.format(\"GET\", \"/v1/playable-items?limit=20&$query\") end"
        echo "  return wrk.format(\"GET\", \"/v1/playable-items?limit=20&$query&cursor=\" .. c) end"
    } > "$work/list.lua"
    bench_wrk "  $title ($(wc -l < "$file") pages)" "http://127.0.0.1:18481" "$work/list.lua" "$large_pid"
}

echo "2. lists of $items items, 20 a page, wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION (target: p99 ≤ 50 ms)"
list "newest first (default)" "sort=-createdAt"
list "oldest first" "sort=createdAt"
list "by title" "sort=title"
list "by title, descending" "sort=-title"
# Searches are expensive reads, of which one client address holds at most 8 at once (the
# rest get 503 serverBusy): wrk's one address searches over 6 connections.
echo "  (searches: wrk -c6)"
BENCH_CONNECTIONS=6
list "search: a word in every title, by relevance" "q=sample"
list "search: a word in every title, by title" "q=sample&sort=title"
list "search: two words in every title" "q=sample+video"
list "search: a two-digit prefix (about 1 row in 90)" "q=77"
list "search: a two-digit prefix, by title" "q=77&sort=title"
list "search: a two-digit prefix, newest first" "q=77&sort=-createdAt"
list "search: one row" "q=$((items / 2 + 1))"
echo "peak RSS: catalog-server $(bench_rss "$large_pid")"

if [ "${SCALE_IMPORT:-0}" = 1 ]; then
    echo "3. catalog export of $items items, then catalog import into an empty server"
    began=$(date +%s.%N)
    "$cli" export --server http://127.0.0.1:18481 --api-key "$large_key" > "$work/export.ndjson"
    echo "  export: $(awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, $(wc -l < "$work/export.ndjson") records"
    "$server" migrate --database "$work/empty.sqlite" >/dev/null
    empty_key=$(bench_admin_key "$server" "$work/empty.sqlite")
    "$server" --port 18482 --database "$work/empty.sqlite" --no-seed --log-level warning --rate-limits off >/dev/null &
    pids+=("$!")
    bench_wait_port 18482
    began=$(date +%s.%N)
    "$cli" import --server http://127.0.0.1:18482 --api-key "$empty_key" < "$work/export.ndjson" >/dev/null
    echo "  import: $(awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
fi
