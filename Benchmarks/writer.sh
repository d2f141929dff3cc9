#!/usr/bin/env bash
# Where a durable create's time goes, for work on the write path (no nginx: this is
# an anatomy, not a ratio; Benchmarks/catalog.sh gives the ratio).
# Durable POSTs under wrk (-t1 -c32, one event loop) on a 10,000-item database, then:
#   1. per server thread, µs per create: on CPU, waiting for a CPU (run queue), and off
#      CPU (sleeping: the writer's fdatasync, the loop's epoll_wait), from
#      /proc/<pid>/task/*/schedstat. The writer's three add up to about 1 / (creates/s)
#      when the writer is the bottleneck: then only its CPU and its syncs move the rate.
#   2. creates per commit (the group-commit batch), when `perf` can count the server's
#      fdatasync calls;
#   3. the WAL as the server left it (killed under load, so that no checkpoint runs):
#      frames per commit, and which b-tree each frame's page belongs to (SQLite's dbstat).
# Usage: Benchmarks/writer.sh   (env: BENCH_DURATION=10s BENCH_CONNECTIONS=32 BENCH_ITEMS=10000;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3 python3
bench_server

work=$(mktemp -d)
database="$work/catalog.sqlite"
port=18282
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$work"' EXIT

"$server" migrate --database "$database" >/dev/null
bench_seed_items "$database" "${BENCH_ITEMS:-10000}"
key=$(bench_admin_key "$server" "$database")
"$server" --port "$port" --loop-threads 1 --database "$database" --no-seed --log-level warning --rate-limits off >/dev/null &
pid=$!
bench_wait_port "$port"
bench_post_script "$work/post.lua" "$key"
url="http://127.0.0.1:$port/v1/playable-items"
BENCH_DURATION=3s bench_wrk "(warm-up)" "$url" "$work/post.lua" >/dev/null

# schedstat: nanoseconds on CPU, nanoseconds waiting on a run queue, timeslices.
snapshot() { for task in /proc/$pid/task/*; do echo "${task##*/} $(cut -d' ' -f1,2 "$task/schedstat")"; done; }
snapshot > "$work/before"
counting=
if command -v perf >/dev/null; then
    perf stat -e syscalls:sys_enter_fdatasync -p "$pid" -x, -o "$work/syncs" 2>/dev/null &
    counting=$!
fi
items() { sqlite3 "$database" "SELECT count(*) FROM playable_items"; }
before=$(items)
start=$(date +%s%N)
bench_wrk "durable creates" "$url" "$work/post.lua" "$pid"
end=$(date +%s%N)
creates=$(( $(items) - before ))
[ -n "$counting" ] && { kill -INT "$counting"; wait "$counting" 2>/dev/null || true; }
snapshot > "$work/after"
echo "per thread (busiest first: the writer, then the event loop), µs per create:"
echo "  thread        on CPU   run queue   off CPU"
join <(sort "$work/before") <(sort "$work/after") | awk -v n="$creates" -v wall=$((end - start)) '
    { cpu = ($4 - $2) / n / 1000; queue = ($5 - $3) / n / 1000; total += cpu
      if (cpu >= 0.5) printf "%s %.1f %.1f %.1f\n", $1, cpu, queue, wall / n / 1000 - cpu - queue }
    END { printf "all %.1f\n", total }' > "$work/threads"
grep -v '^all' "$work/threads" | sort -k2 -rn | awk '{ printf "  %-10s %8s %11s %9s\n", $1, $2, $3, $4 }'
echo "  all threads $(awk '/^all/ {print $2}' "$work/threads") on CPU"
if [ -s "$work/syncs" ]; then
    syncs=$(awk -F, '$3 ~ /fdatasync/ {print $1}' "$work/syncs")
    # The checkpointer's few syncs a second count too: well under 1% of the writer's.
    if [ -n "$syncs" ] && [ "$syncs" -gt 0 ]; then
        echo "creates per commit (per fdatasync): $(awk -v c="$creates" -v s="$syncs" 'BEGIN { printf "%.1f", c / s }')"
    fi
fi

# The WAL as the last commits left it: the server killed under load, so that no checkpoint
# (nor any other write after the load) runs after them.
wrk -t1 -c"${BENCH_CONNECTIONS:-32}" -d3s -s "$work/post.lua" "$url" >/dev/null 2>&1 &
load=$!
sleep 2
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
wait "$load" 2>/dev/null || true
cp "$database-wal" "$work/wal"
sqlite3 "$database" "SELECT pageno, name FROM dbstat" > "$work/pages"
python3 - "$work/wal" "$work/pages" <<'PY'
import collections, struct, sys
wal = open(sys.argv[1], 'rb').read()
_, _, size, _, salt1, salt2, _, _ = struct.unpack('>8I', wal[:32])
commits, frames, offset = [], [], 32
while offset + 24 + size <= len(wal):
    page, commit, s1, s2 = struct.unpack('>4I', wal[offset:offset + 16])
    if (s1, s2) != (salt1, salt2):
        break
    frames.append(page)
    if commit:
        commits.append(frames)
        frames = []
    offset += 24 + size
owner = {}
for line in open(sys.argv[2]):
    page, _, name = line.rstrip('\n').partition('|')
    owner[int(page)] = name
if not commits:
    sys.exit("no commits in the WAL")
tally = collections.Counter(owner.get(page, 'freelist or new') for frames in commits for page in frames)
print(f"WAL frames per commit ({len(commits)} commits since the last rewind, {size}-byte pages): "
      f"{sum(map(len, commits)) / len(commits):.1f}")
for name, count in tally.most_common():
    print(f"  {count / len(commits):6.2f}  {name}")
PY
