#!/usr/bin/env bash
# The change feed, in one run:
#   1. Durable creates (POST /v1/playable-items, wrk) on this build, on a 10,000-item
#      database and on a copy of it without the change log (every trigger that writes into
#      `changes` dropped: nothing is logged, the rest of each create is the same),
#      interleaved: what logging changes costs (target: at most 10% fewer creates per second).
#   2. Long-poll wake-up: 1,000 requests wait (wait=30); one write; how long each takes
#      to answer, from the write's send (target: p99 ≤ 50 ms), over several writes.
#   3. Event streams: 1,000 streams; writes 200 ms apart; how long each event takes to
#      reach each stream (target: p99 ≤ 200 ms), and the server's memory per stream.
# Usage: Benchmarks/changes.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=3 BENCH_CLIENTS=1000;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3 python3
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
clients=${BENCH_CLIENTS:-1000}
ulimit -n 20000
bench_server
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# start NAME PORT [SQL]: the server on a fresh 10,000-item database (SQL run on it first);
# sets $pid and $key.
start() {
    local database="$work/$1.sqlite"
    "$server" migrate --database "$database" >/dev/null
    bench_seed_items "$database" 10000
    [ -z "${3:-}" ] || sqlite3 "$database" "$3"
    key=$(bench_admin_key "$server" "$database")
    "$server" --port "$2" --database "$database" --no-seed --log-level warning --rate-limits off --max-connections-per-address 5000 >/dev/null &
    pid=$!
    pids+=("$pid")
    bench_wait_port "$2"
}

start feed 18381; feed_pid=$pid feed_key=$key
unlogged=$(sqlite3 "$work/feed.sqlite" "SELECT 'DROP TRIGGER ' || name || ';' FROM sqlite_master WHERE type = 'trigger' AND sql LIKE '%INTO changes%'")
start baseline 18380 "$unlogged"; baseline_pid=$pid baseline_key=$key
bench_post_script "$work/baseline.lua" "$baseline_key"
bench_post_script "$work/feed.lua" "$feed_key"

echo "1. durable creates, wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION, $BENCH_ROUNDS rounds, interleaved"
BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:18380/v1/playable-items" "$work/baseline.lua" >/dev/null
BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:18381/v1/playable-items" "$work/feed.lua" >/dev/null
ratios=()
for round in $(seq 1 "$BENCH_ROUNDS"); do
    bench_wrk "  without the change log" "http://127.0.0.1:18380/v1/playable-items" "$work/baseline.lua" "$baseline_pid"; before=$BENCH_RPS
    bench_wrk "  with the change log" "http://127.0.0.1:18381/v1/playable-items" "$work/feed.lua" "$feed_pid"; after=$BENCH_RPS
    ratios+=("$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.1f", 100 * a / b }')")
done
echo "  with/without: $(printf '%s%% ' "${ratios[@]}")-> mean $(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.1f%%", s / NR }')   (target ≥ 90%)"
kill "$baseline_pid"

echo "2. long-polls"
python3 Benchmarks/changes_clients.py longpoll 18381 "$feed_key" "$clients" 5
echo "3. event streams"
python3 Benchmarks/changes_clients.py stream 18381 "$feed_key" "$clients" 20 "$feed_pid"
echo "peak RSS: catalog-server $(bench_rss "$feed_pid")"
