#!/usr/bin/env bash
# The same server on its two engines, side by side in one run: SQLite (a file) and
# PostgreSQL 15 (a throwaway cluster on this machine, started by .ci/postgres.sh), each
# holding the same 10,000 playable items. For each request, interleaved rounds of both:
#   1. GET /v1/playable-items/{random id}
#   2. GET /v1/playable-items?limit=20 (a first page)
#   3. GET /v1/playable-items?q={a random item's number} (a selective search)
#   4. POST /v1/playable-items (durable: SQLite's group commit; PostgreSQL's COMMIT)
# Prints requests/s, p50/p99, non-2xx, the server's CPU µs per request and, for
# PostgreSQL, its processes' CPU µs per request; then the ratios PostgreSQL/SQLite.
# Targets: reads ≥ 50% of SQLite's req/s, durable creates ≥ SQLite's, p99 ≤ 20 ms, no non-2xx.
# Usage: Benchmarks/postgres.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2 BENCH_WORKERS=1 BENCH_ITEMS=10000;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3
bench_server
items=${BENCH_ITEMS:-10000}

work=$(mktemp -d)
chmod 755 "$work"
sqlite_port=18480 postgres_port=18481 cluster_port=55480
sqlite_pid= postgres_pid=
trap '[ -n "$sqlite_pid" ] && kill $sqlite_pid 2>/dev/null; [ -n "$postgres_pid" ] && kill $postgres_pid 2>/dev/null; bash .ci/postgres.sh "$work/cluster" stop; rm -rf "$work"' EXIT

# The same items in both databases.
bench_both_engines "$work" "$items" "$cluster_port"
psql -q "$url" -c "VACUUM ANALYZE"
sqlite3 "$work/catalog.sqlite" "SELECT id FROM playable_items" > "$work/ids.txt"
sqlite_key=$(bench_admin_key "$server" "$work/catalog.sqlite")
postgres_key=$(bench_admin_key "$server" "$url")

"$server" --port "$sqlite_port" --loop-threads "$BENCH_WORKERS" --database "$work/catalog.sqlite" --no-seed --log-level warning --rate-limits off >/dev/null &
sqlite_pid=$!
"$server" --port "$postgres_port" --loop-threads "$BENCH_WORKERS" --database "$url" --no-seed --log-level warning --rate-limits off >/dev/null &
postgres_pid=$!
bench_wait_port "$sqlite_port"
bench_wait_port "$postgres_port"

# Both engines answer the same bytes for the same item (cursors and ranks differ by design).
id=$(head -1 "$work/ids.txt")
bench_same_body "http://127.0.0.1:$sqlite_port/v1/playable-items/$id" "http://127.0.0.1:$postgres_port/v1/playable-items/$id"

{
    echo "ids = {"; sed 's/.*/"&",/' "$work/ids.txt"; echo "}"
    echo 'request = function() return wrk.format("GET", "/v1/playable-items/" .. ids[math.random(#ids)]) end'
} > "$work/get.lua"
echo 'request = function() return wrk.format("GET", "/v1/playable-items?limit=20") end' > "$work/list.lua"
echo "request = function() return wrk.format(\"GET\", \"/v1/playable-items?limit=20&q=\" .. math.random($items)) end" > "$work/search.lua"
for engine in sqlite postgres; do
    key_var=${engine}_key
    bench_post_script "$work/post-$engine.lua" "${!key_var}"
done

# The PostgreSQL cluster's processes (the postmaster and every backend, which live as long as the pools).
cluster_pids() {
    local master
    master=$(head -1 "$work/cluster/data/postmaster.pid")
    echo "$master" $(pgrep -P "$master")
}

echo "database: $items playable items; loop threads: $BENCH_WORKERS each; wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION, ${BENCH_ROUNDS:-2} rounds"
echo "engines: $(curl -sf "http://127.0.0.1:$sqlite_port/readyz" >/dev/null && echo ok) SQLite $(sqlite3 --version | cut -d' ' -f1), $(psql -tA "$url" -c 'SHOW server_version' | cut -d' ' -f1) PostgreSQL"
scenario() {
    local title=$1 script_sqlite=$2 script_postgres=$3 path=${4:-}
    echo "$title"
    BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:$sqlite_port$path" "$script_sqlite" >/dev/null
    BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:$postgres_port$path" "$script_postgres" >/dev/null
    local ratios=()
    for _ in $(seq 1 "${BENCH_ROUNDS:-2}"); do
        bench_wrk "  SQLite" "http://127.0.0.1:$sqlite_port$path" "$script_sqlite" "$sqlite_pid"; local a=$BENCH_RPS
        local before requests
        before=$(bench_cpu_ticks $(cluster_pids))
        # shellcheck disable=SC2046
        bench_wrk "  PostgreSQL" "http://127.0.0.1:$postgres_port$path" "$script_postgres" "$postgres_pid"; local b=$BENCH_RPS
        requests=$(awk -v r="$b" -v d="${BENCH_DURATION%s}" 'BEGIN { printf "%d", r * d }')
        echo "    PostgreSQL's own processes: $(awk -v t="$(( $(bench_cpu_ticks $(cluster_pids)) - before ))" -v hz="$(getconf CLK_TCK)" -v n="$requests" \
            'BEGIN { printf "%.1f", t * 1000000 / hz / n }') µs CPU per request"
        ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", 100 * b / a }')")
    done
    echo "  PostgreSQL/SQLite: $(printf '%s%% ' "${ratios[@]}")-> mean $(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.1f%%", s / NR }')"
}
scenario "GET /v1/playable-items/{random id}   (target ≥ 50%)" "$work/get.lua" "$work/get.lua"
scenario "GET /v1/playable-items?limit=20   (target ≥ 50%)" "$work/list.lua" "$work/list.lua"
# Searches are expensive reads: one client address holds at most 8 of them at once (the
# rest get 503 serverBusy, and a slot frees a moment after its answer leaves), so they are
# measured with 6 connections, not 32.
BENCH_CONNECTIONS=6 scenario "GET /v1/playable-items?q={number}, 6 connections   (target ≥ 50%)" "$work/search.lua" "$work/search.lua"
scenario "POST /v1/playable-items, durable   (target ≥ 100%)" "$work/post-sqlite.lua" "$work/post-postgres.lua" /v1/playable-items
echo "peak RSS: SQLite-backed $(bench_rss "$sqlite_pid"), PostgreSQL-backed $(bench_rss "$postgres_pid")"
