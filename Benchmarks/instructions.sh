#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: repeatable for the same
# binary and requests whatever else the machine does, so it shows small differences
# between two builds that req/s and CPU time on a shared machine cannot.
# Each server answers a fixed sequence over one keep-alive connection (curl): 300 GETs
# of random items (anonymous, then again with an API key), 100 first list pages, 200
# durable POSTs, 100 selective searches (`q=` an item's number, each a different one), on
# a 10,000-item database; and, last, the same 300 items asked again once they have been
# read (nothing changed: what a GET of an unchanged item costs).
# Each kind is measured as what its requests add to a warm-up of the same kind (50 GETs
# of other items, 10 list pages, 20 POSTs) answered by itself: the difference, divided by
# the requests, is what one more request costs, without start-up, shutdown, or the
# one-time work a first request of a kind does (a connection opened, a statement
# prepared, a type's metadata made), which lands on whichever run meets it first.
# Usage: Benchmarks/instructions.sh [SERVER...]   (default: this checkout, built as the image ships it;
#        name an earlier commit's build too to compare them side by side)
#   env: INSTRUCTIONS_SERVER_FLAGS (default "--rate-limits off"; "" keeps the defaults, rate
#        limits on, and suits builds older than the flag); INSTRUCTIONS_PROFILES=DIR keeps each
#        run's callgrind output there (DIR/N-what.T.out, N counting the servers, T the thread), for
#        `callgrind_annotate` to show where the instructions go')
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
command -v valgrind >/dev/null || { apt-get update -qq; apt-get install -y -qq valgrind >/dev/null; }
bench_require sqlite3 curl
[ $# -gt 0 ] || set -- "$(bench_build catalog-server)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=18390
"$1" migrate --database "$work/base.sqlite" >/dev/null
bench_seed_items "$work/base.sqlite" 10000
key=$(bench_admin_key "$1" "$work/base.sqlite")
sqlite3 "$work/base.sqlite" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
url="http://127.0.0.1:$port"
post_body='{"title":"Benchmark upload","description":"Posted by curl.","streamURL":"https://videos.example.com/new/master.m3u8","durationSeconds":42}'
sqlite3 "$work/base.sqlite" "SELECT id FROM playable_items ORDER BY random() LIMIT 350" \
    | sed "s|.*|url = \"$url/v1/playable-items/&\"\noutput = /dev/null|" > "$work/ids.conf"
head -n 100 "$work/ids.conf" > "$work/get-warm.conf"
cp "$work/ids.conf" "$work/get.conf"
# The same 300 items asked again after they were read once (unchanged, so not asked of the database).
{ cat "$work/ids.conf"; tail -n 600 "$work/ids.conf"; } > "$work/get-again.conf"
# With the key: its first use (a database read and a write) is in the warm-up, so what is
# left is what checking a known key costs. Options in a curl config apply to every URL
# after them unless `next` starts a new set: each request carries its own one header.
printf 'url = "%s/v1/me"\noutput = /dev/null\nheader = "Authorization: Bearer %s"\n' "$url" "$key" > "$work/me-key.conf"
keyed() { sed "s|^output = /dev/null|&\nheader = \"Authorization: Bearer $key\"|; s|^url|next\nurl|" "$1"; }
{ cat "$work/me-key.conf"; keyed "$work/get-warm.conf"; } > "$work/get-key-warm.conf"
{ cat "$work/me-key.conf"; keyed "$work/get.conf"; } > "$work/get-key.conf"
for _ in $(seq 1 110); do printf 'url = "%s/v1/playable-items?limit=20&sort=title"\noutput = /dev/null\n' "$url"; done > "$work/list.conf"
head -n 20 "$work/list.conf" > "$work/list-warm.conf"
posts() {
    for _ in $(seq 1 "$1"); do
        printf 'url = "%s/v1/playable-items"\nheader = "Content-Type: application/json"\nheader = "Authorization: Bearer %s"\ndata = "%s"\noutput = /dev/null\nnext\n' \
            "$url" "$key" "${post_body//\"/\\\"}"
    done | sed '$d'
}
# Searches by numbers of items: each once (a search's matches are kept for the database's version).
for i in $(seq 1 140); do printf 'url = "%s/v1/playable-items?limit=20&q=%s"\noutput = /dev/null\n' "$url" $(((i * 7919) % 10000 + 1)); done > "$work/search.conf"
head -n 80 "$work/search.conf" > "$work/search-warm.conf"
posts 20 > "$work/post-warm.conf"
posts 220 > "$work/post.conf"

# The threads that answer requests and write what they change: event loops, the work pool
# (expensive reads), the group-commit writer, the checkpointer, the change hub and the log
# writer. Left out: start-up and shutdown (the main thread), and threads on timers that
# wake whenever they wake (webhook dispatch and sending, video processing, signals).
serving='EventLoopC3runyyF|GroupCommitC4loop|WorkPoolC4work|CheckpointerC4path[A-Za-z_0-9]*U_|ChangeHubC3run|LogWriterC3run'

# instructions SERVER CONFIG NAME: callgrind's total for the serving threads answering CONFIG.
instructions() {
    # valgrind 3.19 cannot read the DWARF of Swift 6 builds: profile a copy without it.
    strip --strip-debug -o "$work/server" "$1"
    cp "$work/base.sqlite" "$work/catalog.sqlite"
    rm -f "$work"/callgrind.out*
    valgrind --tool=callgrind --separate-threads=yes --compress-strings=no --callgrind-out-file="$work/callgrind.out" "$work/server" --port $port --loop-threads 1 \
        --database "$work/catalog.sqlite" --no-seed --log-level warning ${INSTRUCTIONS_SERVER_FLAGS---rate-limits off} >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
    curl -sf -K "$2"
    kill -TERM $pid
    wait $pid || true
    local total=0 file
    for file in "$work"/callgrind.out-*; do
        grep -qE "^fn=.*($serving)" "$file" || continue
        total=$((total + $(awk '/^(summary|totals):/ { print $2; exit }' "$file")))
        [ -n "${INSTRUCTIONS_PROFILES:-}" ] && mkdir -p "$INSTRUCTIONS_PROFILES" && cp "$file" "$INSTRUCTIONS_PROFILES/$3.${file##*-}.out"
    done
    echo $total
}

printf '%-40s %14s %14s %14s %14s %14s %16s\n' "instructions per request" "GET item" "GET (API key)" "list page" "POST (durable)" "search" "GET unchanged"
number=0
for server in "$@"; do
    number=$((number + 1))
    per_request=()
    for kind in get get-key list post search; do
        warm=$(instructions "$server" "$work/$kind-warm.conf" "$number-$kind-warm")
        all=$(instructions "$server" "$work/$kind.conf" "$number-$kind")
        case $kind in list) count=100 ;; post) count=200 ;; search) count=100 ;; *) count=300 ;; esac
        per_request+=($(((all - warm) / count)))
        [ $kind = get ] && get_all=$all
    done
    again=$(instructions "$server" "$work/get-again.conf" "$number-get-again")
    per_request+=($(((again - get_all) / 300)))
    printf '%-40s %14s %14s %14s %14s %14s %16s\n' "$server" "${per_request[@]}"
done
