#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: repeatable for the same
# binary and requests whatever else the machine does, so it shows small differences
# between two builds that req/s and CPU time on a shared machine cannot.
# Each server answers a fixed sequence over one keep-alive connection (curl): 300 GETs
# of random items (anonymous, then again with an API key), 100 first list pages, 200
# durable POSTs, on a 10,000-item database.
# A run answering one /healthz is subtracted (start-up and shutdown).
# Usage: Benchmarks/instructions.sh [SERVER...]   (default: .build/release/catalog-server;
#        name an earlier commit's build too to compare them side by side)
#   env: INSTRUCTIONS_SERVER_FLAGS (default "--rate-limits off"; "" keeps the defaults, rate
#        limits on, and suits builds older than the flag); INSTRUCTIONS_PROFILES=DIR keeps each
#        run's callgrind output there (DIR/N-what.out, N counting the servers), for
#        `callgrind_annotate` to show where the instructions go')
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
command -v valgrind >/dev/null || { apt-get update -qq; apt-get install -y -qq valgrind >/dev/null; }
bench_require sqlite3 curl
[ $# -gt 0 ] || { swift build -c release --product catalog-server >/dev/null; set -- .build/release/catalog-server; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=18390
"$1" migrate --database "$work/base.sqlite" >/dev/null
bench_seed_items "$work/base.sqlite" 10000
key=$(bench_admin_key "$1" "$work/base.sqlite")
sqlite3 "$work/base.sqlite" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
url="http://127.0.0.1:$port"
post_body='{"title":"Benchmark upload","description":"Posted by curl.","streamURL":"https://videos.example.com/new/master.m3u8","durationSeconds":42}'
printf 'url = "%s/healthz"\noutput = /dev/null\n' "$url" > "$work/base.conf"
sqlite3 "$work/base.sqlite" "SELECT id FROM playable_items ORDER BY random() LIMIT 300" \
    | sed "s|.*|url = \"$url/v1/playable-items/&\"\noutput = /dev/null|" > "$work/get.conf"
# With the key: its first use (a database read and a write) is in the base, so what is
# left is what checking a known key costs. Options in a curl config apply to every URL
# after them unless `next` starts a new set: each request carries its own one header.
printf 'url = "%s/v1/me"\noutput = /dev/null\nheader = "Authorization: Bearer %s"\n' "$url" "$key" > "$work/base-key.conf"
{ cat "$work/base-key.conf"; sed "s|^output = /dev/null|&\nheader = \"Authorization: Bearer $key\"|; s|^url|next\nurl|" "$work/get.conf"; } > "$work/get-key.conf"
for _ in $(seq 1 100); do printf 'url = "%s/v1/playable-items?limit=20&sort=title"\noutput = /dev/null\n' "$url"; done > "$work/list.conf"
for _ in $(seq 1 200); do
    printf 'url = "%s/v1/playable-items"\nheader = "Content-Type: application/json"\nheader = "Authorization: Bearer %s"\ndata = "%s"\noutput = /dev/null\nnext\n' \
        "$url" "$key" "${post_body//\"/\\\"}"
done | sed '$d' > "$work/post.conf"

# instructions SERVER CONFIG: callgrind's total for the server answering CONFIG.
instructions() {
    # valgrind 3.19 cannot read the DWARF of Swift 6 builds: profile a copy without it.
    strip --strip-debug -o "$work/server" "$1"
    cp "$work/base.sqlite" "$work/catalog.sqlite"
    rm -f "$work/callgrind.out"
    valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$work/server" --port $port --loop-threads 1 \
        --database "$work/catalog.sqlite" --no-seed --log-level warning ${INSTRUCTIONS_SERVER_FLAGS---rate-limits off} >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
    curl -sf -K "$2"
    kill -TERM $pid
    wait $pid || true
    [ -n "${INSTRUCTIONS_PROFILES:-}" ] && mkdir -p "$INSTRUCTIONS_PROFILES" && cp "$work/callgrind.out" "$INSTRUCTIONS_PROFILES/$3.out"
    callgrind_annotate "$work/callgrind.out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }'
}

printf '%-40s %14s %14s %14s %14s\n' "instructions per request" "GET item" "GET (API key)" "list page" "POST (durable)"
number=0
for server in "$@"; do
    number=$((number + 1))
    base=$(instructions "$server" "$work/base.conf" "$number-base")
    get=$(instructions "$server" "$work/get.conf" "$number-get")
    keyed=$(instructions "$server" "$work/get-key.conf" "$number-get-key")
    keyed_base=$(instructions "$server" "$work/base-key.conf" "$number-base-key")
    list=$(instructions "$server" "$work/list.conf" "$number-list")
    post=$(instructions "$server" "$work/post.conf" "$number-post")
    printf '%-40s %14s %14s %14s %14s\n' "$server" $(((get - base) / 300)) $(((keyed - keyed_base) / 300)) $(((list - base) / 100)) $(((post - base) / 200))
done
