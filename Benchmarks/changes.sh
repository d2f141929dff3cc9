#!/usr/bin/env bash
# The change feed, in one run:
#   1. Durable creates (POST /v1/playable-items, wrk) on this build and on a build without
#      the change log, on 10,000-item databases, interleaved: what logging changes costs
#      (target: at most 10% fewer creates per second).
#   2. Long-poll wake-up: 1,000 requests wait (wait=30); one write; how long each takes
#      to answer, from the write's send (target: p99 ≤ 50 ms), over several writes.
#   3. Event streams: 1,000 streams; writes 200 ms apart; how long each event takes to
#      reach each stream (target: p99 ≤ 200 ms), and the server's memory per stream.
# Usage: Benchmarks/changes.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=3 BENCH_CLIENTS=1000;
#        CATALOG_BASELINE=path/to/catalog-server of a build without the change log, else
#        one is built from BASELINE_REV, default f6f90d7, in a worktree: several minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3 python3
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
clients=${BENCH_CLIENTS:-1000}
ulimit -n 20000
server=.build/release/catalog-server
swift build -c release --product catalog-server >/dev/null
work=$(mktemp -d)
baseline=${CATALOG_BASELINE:-}
if [ -z "$baseline" ]; then
    git worktree add -f "$work/baseline-tree" "${BASELINE_REV:-f6f90d7}" >/dev/null 2>&1
    (cd "$work/baseline-tree" && swift build -c release --product catalog-server >/dev/null)
    baseline="$work/baseline-tree/.build/release/catalog-server"
fi
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -d "$work/baseline-tree" ] && git worktree remove --force "$work/baseline-tree" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# start NAME BINARY PORT: a server on a fresh 10,000-item database; sets $pid and $key.
start() {
    local database="$work/$1.sqlite"
    "$2" migrate --database "$database" >/dev/null
    bench_seed_items "$database" 10000
    key=$(bench_admin_key "$2" "$database")
    "$2" --port "$3" --database "$database" --no-seed --log-level warning --rate-limits off --max-connections-per-address 5000 >/dev/null &
    pid=$!
    pids+=("$pid")
    bench_wait_port "$3"
}

start baseline "$baseline" 18380; baseline_pid=$pid baseline_key=$key
start feed "$server" 18381; feed_pid=$pid feed_key=$key
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
