#!/usr/bin/env bash
# Noisy neighbours: how much abusive clients hurt a well-behaved one, and the server's memory.
# For each pattern a fresh catalog-server starts on a copy of one seeded database (40,000
# playable items, 40,000 locations, an admin key; or on NOISY_DATABASE, see below), then for
# BENCH_DURATION seconds a victim (anonymous, from 127.0.0.2: GET /v1/playable-items/{id}
# every 20 ms over one keep-alive connection) and 4 attackers (from 127.0.0.10-13; 1 in
# anonymous-bodies) run at once:
#   baseline         no attackers, for reference
#   get-flood        GET /v1/playable-items/{id}, 16 pipelined at a time, as fast as possible
#   metrics-labels   16 pipelined requests with random 4 KB method names, and GET /metrics (admin)
#   search           GET /v1/playable-items?q=a b c … p (16 one-letter words), alternating with q=sample
#   near             GET /v1/locations?near=LAT,LNG without radius (every location by distance)
#   big-comments     100 comments of ~1 MiB (1 letter + combining marks) on one item; attackers
#                    pipeline 8 × GET …/comments?limit=100 per connection, never read, hold 20 each
#   slow-body        up to 100 connections each: POST /v1/games (admin key), Content-Length 1000,
#                    one body byte every 1.5 s
#   buffered-bodies  up to 75 connections each: POST /v1/games (admin key), Content-Length 1000000,
#                    999,999 bytes sent, then nothing
#   backups          POST /admin/backups back to back (admin key); reports what the backup dir holds
#   writer           PUT /v1/playlists/{id}/entries, a 5,000-entry order (the most a playlist holds;
#                    reversed, shuffled), each attacker on its own playlist; the victim alternates
#                    its GET with POST /v1/games (its own editor key); the victim columns and the
#                    target are its GETs, its POSTs are reported in the notes
#   deferred-queue   64 pipelined POST /v1/games (admin key), never read, then a reset (SO_LINGER 0)
#   many-errors      POST /v1/playable-items/{id}/comments and PATCH /v1/me (merge patch), pipelined
#                    in pairs as fast as possible, each body a JSON object of as many unknown members
#                    as fit in 256 KiB (~32,000); each attacker a member user of its own (made with
#                    the admin key); the notes give the largest answer of each method and status
#   anonymous-bodies one attacker (127.0.0.10), up to 130 connections: POST /v1/games without a
#                    credential, Content-Length 1048575, 16 KiB of body, then 1 KiB a second (every
#                    other connection) or nothing more; the victim also posts, as in writer
#   playlist-moves   PATCH /v1/playlists/{id}/entries/{entryId} {"position":4999} then {"position":0}
#                    (merge patch), pipelined in pairs as fast as possible: the first entry of a
#                    5,000-entry playlist to the end and back, each attacker an editor user of its
#                    own on its own playlist; the victim also posts, as in writer
#   feed-pages       8 connections each, anonymous: GET /v1/changes?limit=1000 (from the beginning,
#                    no since) back to back; the victim alternates its GET with GET
#                    /v1/changes?since=<the feed's end at setup> (an empty page), in the notes
#   idle-streams     90 event streams each (GET /v1/changes?since=<the feed's end>, Accept:
#                    text/event-stream; SO_RCVBUF 4 KiB set before connect), never read; attacker 1
#                    also replaces the order of a 5,000-entry playlist 5 times over the window (a
#                    change of ~0.5 MB each stream is to be sent); a stream the server cuts still
#                    counts as held (its FIN waits behind the unread bytes): see the notes' count
#   behind-proxy     nginx (/usr/sbin/nginx; skipped without it) in front of the server, which runs
#                    with --trusted-proxies 127.0.0.1 (X-Forwarded-For, as deploy/nginx-replicas.conf:
#                    HTTP/1.1, keep-alive upstream); the victim and the attackers connect to nginx
#                    (port 1000 above the pattern's server); each attacker holds 130 long-polls
#                    (GET /v1/changes?since=<the feed's end>&wait=30) and runs get-flood
#   image-uploads    one member (every attacker holds its key) uploads a 1600 × 1200 JPEG as its
#                    avatar, 4 pipelined at a time per attacker, as fast as possible
# many-errors, anonymous-bodies, feed-pages, idle-streams and behind-proxy also note what the
# server's metrics say near the window's end: event streams, long-polls waiting, connections
# open, and the refusals so far by reason.
# Per pattern: victim p50/p99 (failures count as infinitely slow), victim errors (connection
# failures and non-2xx), what the attackers got, the server's peak RSS (VmHWM), and PASS when
# p99 ≤ 25 ms, peak RSS ≤ 256 MiB and the server is alive and answering afterwards.
# A server whose RSS passes NOISY_RSS_CAP_MIB (default 2048) is killed (reported as such), so a
# pattern cannot take this machine's memory from everyone else.
#
# Usage: Benchmarks/noisy-neighbour.sh [--strict] [PATTERN...]
#   env: CATALOG_SERVER (default .build-image/release/catalog-server, as the image ships it; not built here),
#        BENCH_DURATION=10 (seconds per pattern), NOISY_PATTERNS=a,b (or PATTERN arguments),
#        NOISY_SERVER_FLAGS="--flag value" (added to every server start), NOISY_OUTPUT=FILE (the
#        table, also), NOISY_RSS_CAP_MIB=2048, NOISY_MIGRATIONS=DIR (default: Migrations beside
#        the server binary if there is such a folder, else ./Migrations),
#        NOISY_ATTACKER_NICE=0 (niceness of the attacker processes), NOISY_PORT=18380 (first port;
#        pattern N listens on NOISY_PORT+N-1, behind-proxy's nginx 1000 above that),
#        NOISY_DATABASE=postgresql://… (every pattern on that PostgreSQL database instead: migrated,
#        and seeded with the same items and locations when it holds none; not copied, so the
#        patterns share it and leave their data there: give it a throwaway database; needs psql).
#   --strict: exit 1 when a pattern misses the target (otherwise 0 unless the script broke).
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh

strict=
patterns=()
for arg in "$@"; do
    case $arg in
        --strict) strict=--strict ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $arg" >&2; exit 64 ;;
        *) patterns+=("$arg") ;;
    esac
done
all_patterns=(baseline get-flood metrics-labels search near big-comments slow-body buffered-bodies backups writer deferred-queue
              many-errors anonymous-bodies playlist-moves feed-pages idle-streams behind-proxy image-uploads)
if [ ${#patterns[@]} -eq 0 ] && [ -n "${NOISY_PATTERNS:-}" ]; then IFS=', ' read -r -a patterns <<<"$NOISY_PATTERNS"; fi
[ ${#patterns[@]} -gt 0 ] || patterns=("${all_patterns[@]}")
for pattern in "${patterns[@]}"; do
    [[ " ${all_patterns[*]} " == *" $pattern "* ]] || { echo "unknown pattern $pattern (one of: ${all_patterns[*]})" >&2; exit 64; }
done

server=${CATALOG_SERVER:-.build-image/release/catalog-server}
if [ ! -x "$server" ]; then
    if [ -z "${CATALOG_SERVER:-}" ]; then
        echo "no $server: build it first (swift build -c release --static-swift-stdlib --scratch-path .build-image --product catalog-server), or set CATALOG_SERVER" >&2
    else
        echo "CATALOG_SERVER=$server is not an executable file" >&2
    fi
    exit 1
fi
server=$(cd "$(dirname "$server")" && pwd)/$(basename "$server")
database=${NOISY_DATABASE:-}
needed=(sqlite3 python3)
if [ -n "$database" ]; then
    [[ $database == postgres://* || $database == postgresql://* ]] || { echo "NOISY_DATABASE must be a postgresql:// URL" >&2; exit 64; }
    needed+=(psql)
fi
for command in "${needed[@]}"; do
    command -v "$command" >/dev/null || { echo "$command is needed (apt-get install $command)" >&2; exit 1; }
done
if [ -n "${NOISY_MIGRATIONS:-}" ]; then migrations=$NOISY_MIGRATIONS
elif [ -d "$(dirname "$server")/Migrations" ]; then migrations=$(dirname "$server")/Migrations
else migrations=$PWD/Migrations
fi
duration=${BENCH_DURATION%s}
[[ $duration =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "BENCH_DURATION must be seconds, not $BENCH_DURATION" >&2; exit 64; }
items=40000 locations=40000
port=${NOISY_PORT:-18380}

work=$(mktemp -d "${TMPDIR:-/tmp}/noisy-neighbour.XXXXXX")
driver=
cleanup() {
    if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then
        kill -TERM "$driver" 2>/dev/null || true
        wait "$driver" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The template: migrated, seeded, an admin key, checkpointed; every pattern runs on a copy.
started=$(date +%s) load=$(cut -d' ' -f1-3 /proc/loadavg)
template="$work/template.sqlite"
"$server" migrate --database "$template" --migrations "$migrations" >/dev/null
bench_seed_items "$template" "$items"
sqlite3 "$template" <<SQL
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $locations)
INSERT INTO locations (id, name, country_code, latitude, longitude, created_at, updated_at, version)
SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
             || substr('89ab', 1 + abs(random()) % 4, 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
       'Sample place ' || i,
       substr('FRDEESITGBUSCAJPCNBRINAUMXZAKRNLSEPLPTARCLNO', 1 + 2 * (i % 22), 2),
       round((abs(random()) % 17800000) / 100000.0 - 89, 5),
       round((abs(random()) % 35800000) / 100000.0 - 179, 5),
       1763000000000 + i * 1000, 1763000000000 + i * 1000, 1
FROM n;
SQL
if [ -n "$database" ]; then
    # PostgreSQL: the template's rows copied in once (a database that holds items or locations
    # already keeps them), then every pattern runs on it.
    "$server" migrate --database "$database" --migrations "$migrations" >/dev/null
    item_columns="id, title, description, stream_url, thumbnail_url, duration_seconds, created_at, updated_at, version"
    location_columns="id, name, country_code, latitude, longitude, created_at, updated_at, version"
    for table in playable_items locations; do
        [ "$(psql -tAq "$database" -c "SELECT count(*) FROM $table")" = 0 ] || continue
        columns=$([ $table = playable_items ] && echo "$item_columns" || echo "$location_columns")
        sqlite3 -csv "$template" "SELECT $columns FROM $table ORDER BY pk" > "$work/$table.csv"
        psql -q "$database" -c "\\copy $table ($columns) FROM '$work/$table.csv' CSV"
        rm -f "$work/$table.csv"
    done
    psql -q "$database" -c "VACUUM ANALYZE"
    key=$("$server" keys create --role admin --name bench --database "$database" --migrations "$migrations" 2>/dev/null)
    psql -tAq "$database" -c "SELECT id FROM playable_items ORDER BY pk" > "$work/ids.txt"
    items=$(wc -l < "$work/ids.txt")
    locations=$(psql -tAq "$database" -c "SELECT count(*) FROM locations")
    engine="PostgreSQL $(psql -tAq "$database" -c 'SHOW server_version' | cut -d' ' -f1) (NOISY_DATABASE, shared by the patterns)"
else
    key=$("$server" keys create --role admin --name bench --database "$template" --migrations "$migrations" 2>/dev/null)
    sqlite3 "$template" "SELECT id FROM playable_items ORDER BY pk" > "$work/ids.txt"
    sqlite3 "$template" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
    engine="SQLite, a copy per pattern"
fi
[ -n "$key" ] || { echo "keys create printed no key" >&2; exit 1; }
echo "$items items and $locations locations ready in $(( $(date +%s) - started )) s ($engine); ${#patterns[@]} patterns × ${duration} s" >&2

results="$work/results.jsonl"
: > "$results"
number=0
for pattern in "${patterns[@]}"; do
    number=$((number + 1))
    dir="$work/$pattern"
    mkdir -p "$dir"
    if [ -z "$database" ]; then
        for suffix in "" -wal -shm; do
            [ -f "$template$suffix" ] && cp "$template$suffix" "$dir/catalog.sqlite$suffix"
        done
    fi
    echo "[$number/${#patterns[@]}] $pattern" >&2
    python3 Benchmarks/noisy_neighbour.py run --pattern "$pattern" --server "$server" \
        --database "${database:-$dir/catalog.sqlite}" --migrations "$migrations" --port $((port + number - 1)) \
        --workdir "$dir" --cwd "$PWD" --ids "$work/ids.txt" --admin-key "$key" --duration "$duration" \
        --results "$results" --server-flags "${NOISY_SERVER_FLAGS:-}" --rss-cap-mib "${NOISY_RSS_CAP_MIB:-2048}" \
        --attacker-nice "${NOISY_ATTACKER_NICE:-0}" &
    driver=$!
    wait "$driver"
    driver=
    rm -rf "$dir"
done

context="$items items, $locations locations, $engine; ${duration} s per pattern; $(nproc) cores, load $load at the start"
status=0
python3 Benchmarks/noisy_neighbour.py report --results "$results" --server "$server" --context "$context" \
    --output "${NOISY_OUTPUT:-}" $strict || status=$?
exit $status
