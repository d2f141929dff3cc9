#!/usr/bin/env bash
# Webhooks under load (issue 37, "Measure"), in one run on a 10,000-item SQLite catalog,
# with five endpoints subscribed to "*": four healthy receivers and one slow one that
# answers each message 2 s after it arrives (Tests/Fixtures/webhook_receiver.py, each
# verifying every message with the reference library, PyPI standardwebhooks 1.1.0):
#   1. 1,000 creates a second (POST /v1/games, paced over keep-alive connections with an
#      admin key) for BENCH_SECONDS: is every message delivered to each healthy receiver
#      (waiting up to WEBHOOK_DRAIN_SECONDS after the load ends)? From commit (the message's
#      `timestamp`) to the receiver's first byte, p50 / p99 / max per healthy receiver
#      (target: p99 ≤ 200 ms); the server's peak RSS and its RSS after; the slow
#      endpoint's progress (what it received, what the server says is pending or dropped).
#   2. Durable creates as Benchmarks/catalog.sh measures them (wrk POST /v1/playable-items,
#      every 201 durable) without and with the five endpoints, interleaved, BENCH_ROUNDS
#      rounds each (target: with ≥ 95% of without, as the ratio of the medians); then nginx
#      serving an answer of the same size from a static file, for scale.
# The receivers share this machine's two cores with wrk and the server: in part 2 they run
# at nice BENCH_RECEIVER_NICE (default 19), so that what the creates lose is the server's
# own delivery work rather than the receivers' CPU (which a real deployment has elsewhere);
# the server's CPU per create, with and without, is the steadier comparison.
# Usage: Benchmarks/webhooks.sh   (env: BENCH_SECONDS=20 BENCH_RATE=1000 BENCH_LOAD_CONNECTIONS=8
#        WEBHOOK_DRAIN_SECONDS=60 BENCH_DURATION=10s BENCH_ROUNDS=3 BENCH_WORKERS=1
#        BENCH_ITEMS=10000 BENCH_RECEIVER_NICE=19 WEBHOOK_SERVER_FLAGS="…" (more server flags);
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3 python3 curl
python3 -c 'import standardwebhooks' 2>/dev/null || {
    echo "installing standardwebhooks==1.1.0 (PyPI)" >&2
    python3 -m pip install -q standardwebhooks==1.1.0
}
bench_server
items=${BENCH_ITEMS:-10000}
seconds=${BENCH_SECONDS:-20}
rate=${BENCH_RATE:-1000}
load_connections=${BENCH_LOAD_CONNECTIONS:-8}
drain=${WEBHOOK_DRAIN_SECONDS:-60}
receiver_nice=${BENCH_RECEIVER_NICE:-19}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}

work=$(mktemp -d)
database="$work/catalog.sqlite"
ours_port=18480 nginx_port=18481
ours=
receivers=()
cleanup() {
    [ -n "$ours" ] && kill "$ours" 2>/dev/null || true
    for pid in "${receivers[@]}"; do kill "$pid" 2>/dev/null || true; done
    bench_nginx_stop "$work"
    rm -rf "$work"
}
trap cleanup EXIT

# The receivers: NAME [RECEIVER FLAGS...] each, on ports of their own choosing.
healthy=(healthy1 healthy2 healthy3 healthy4)
names=("${healthy[@]}" slow)
start_receiver() {
    local name=$1; shift
    python3 Tests/Fixtures/webhook_receiver.py --port-file "$work/$name.port" --log "$work/$name.log" \
        --secrets-file "$work/$name.secrets" --exit-with-parent "$@" &
    receivers+=($!)
    for _ in $(seq 1 100); do [ -s "$work/$name.port" ] && return 0; sleep 0.1; done
    echo "receiver $name did not start" >&2
    return 1
}
for name in "${healthy[@]}"; do start_receiver "$name"; done
start_receiver slow --delay 2

"$server" migrate --database "$database" >/dev/null
bench_seed_items "$database" "$items"
key=$(bench_admin_key "$server" "$database")

# shellcheck disable=SC2086 # WEBHOOK_SERVER_FLAGS is a list of flags
"$server" --port "$ours_port" --loop-threads "$BENCH_WORKERS" --database "$database" --no-seed --log-level warning --rate-limits off \
    --webhook-allowed-networks 127.0.0.1/32 --webhook-http-networks 127.0.0.1/32 ${WEBHOOK_SERVER_FLAGS:-} >/dev/null &
ours=$!
bench_wait_port "$ours_port"

# create_endpoints: one endpoint per receiver, subscribed to "*"; each secret goes to its
# receiver's secrets file (which the receiver re-reads). delete_endpoints: all of them
# (their pending deliveries go with them).
endpoints=()
create_endpoints() {
    local id
    endpoints=()
    for name in "${names[@]}"; do
        id=$(python3 Benchmarks/webhook_load.py endpoint create "$ours_port" "$key" "http://127.0.0.1:$(cat "$work/$name.port")/" "$work/$name.secrets")
        endpoints+=("$id")
    done
}
delete_endpoints() {
    for id in "${endpoints[@]}"; do python3 Benchmarks/webhook_load.py endpoint delete "$ours_port" "$key" "$id"; done
    endpoints=()
}
# log_lines NAME...: the requests the receivers have logged.
log_lines() {
    local total=0
    for name in "$@"; do total=$((total + $( [ -f "$work/$name.log" ] && wc -l < "$work/$name.log" || echo 0 ))); done
    echo "$total"
}
rss_now() {
    awk '/^VmRSS:/ {print $2 " " $3}' "/proc/$1/status"
}
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
mean() {
    printf '%s\n' "$@" | awk '{ s += $1 } END { printf "%.1f", s / NR }'
}

echo "database: $items playable items; workers: $BENCH_WORKERS; receivers: ${#healthy[@]} healthy, 1 answering after 2 s"

echo "1. $rate creates/s (POST /v1/games) for $seconds s over $load_connections keep-alive connections, five endpoints subscribed to \"*\""
create_endpoints
server_ticks=$(bench_cpu_ticks "$ours")
receiver_ticks=$(bench_cpu_ticks "${receivers[@]}")
python3 Benchmarks/webhook_load.py load --port "$ours_port" --key "$key" --rate "$rate" --seconds "$seconds" \
    --connections "$load_connections" --ids "$work/created.txt" --server-pid "$ours" || echo "  (not every create was a 201)"
logs=()
for name in "${healthy[@]}"; do logs+=("$name=$work/$name.log"); done
python3 Benchmarks/webhook_load.py report --ids "$work/created.txt" --wait "$drain" --healthy "${logs[@]}" --slow "slow=$work/slow.log" || true
creates=$(wc -l < "$work/created.txt")
if [ "$creates" -gt 0 ]; then
    hz=$(getconf CLK_TCK)
    echo "  CPU per create, from the load's start to the end of the wait: server" \
        "$(awk -v t="$(( $(bench_cpu_ticks "$ours") - server_ticks ))" -v hz="$hz" -v n="$creates" 'BEGIN { printf "%.1f", t * 1000000 / hz / n }') µs" \
        "(the create and its five deliveries), the five receivers" \
        "$(awk -v t="$(( $(bench_cpu_ticks "${receivers[@]}") - receiver_ticks ))" -v hz="$hz" -v n="$creates" 'BEGIN { printf "%.1f", t * 1000000 / hz / n }') µs"
fi
echo "  the endpoints, as the server counts them:"
labels=()
for name in "${names[@]}"; do labels+=("$name=http://127.0.0.1:$(cat "$work/$name.port")/"); done
python3 Benchmarks/webhook_load.py endpoint show "$ours_port" "$key" "${labels[@]}"
echo "  server RSS: peak $(bench_rss "$ours"), after the wait $(rss_now "$ours")"
delete_endpoints
for name in "${names[@]}"; do : > "$work/$name.log"; done
sleep 2

echo "2. durable creates (POST /v1/playable-items), wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION, without and with the five endpoints," \
    "$BENCH_ROUNDS rounds each, interleaved; receivers at nice $receiver_nice"
renice -n "$receiver_nice" -p "${receivers[@]}" >/dev/null
bench_post_script "$work/post.lua" "$key"
url="http://127.0.0.1:$ours_port/v1/playable-items"
BENCH_DURATION=5s bench_wrk "  (warm-up)" "$url" "$work/post.lua" >/dev/null
without=() with=() without_cpu=() with_cpu=()
for _ in $(seq 1 "$BENCH_ROUNDS"); do
    bench_wrk "  without endpoints" "$url" "$work/post.lua" "$ours"; without+=("$BENCH_RPS"); without_cpu+=("$BENCH_CPU_US")
    create_endpoints
    receiver_ticks=$(bench_cpu_ticks "${receivers[@]}")
    bench_wrk "  with five endpoints" "$url" "$work/post.lua" "$ours"; with+=("$BENCH_RPS"); with_cpu+=("$BENCH_CPU_US")
    echo "    from the round's start until the endpoints were deleted, the healthy receivers got $(log_lines "${healthy[@]}") messages, the slow one $(log_lines slow);" \
        "the receivers used $(awk -v t="$(( $(bench_cpu_ticks "${receivers[@]}") - receiver_ticks ))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }') s of CPU"
    delete_endpoints
    for name in "${names[@]}"; do : > "$work/$name.log"; done
    sleep 2
done
echo "  creates/s without: $(printf '%s ' "${without[@]}")-> median $(median "${without[@]}"); with: $(printf '%s ' "${with[@]}")-> median $(median "${with[@]}")"
echo "  with/without (medians): $(bench_ratio "$(median "${with[@]}")" "$(median "${without[@]}")")   (target ≥ 95%)"
echo "  server CPU per create: without $(mean "${without_cpu[@]}") µs, with $(mean "${with_cpu[@]}") µs"

# For scale, as Benchmarks/catalog.sh: nginx serving an answer of the same size.
mkdir -p "$work/static"
curl -sf -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $key" -d "$BENCH_POST_BODY" "$url" -o "$work/static/created"
bench_nginx "$work" "$nginx_port" "/created $work/static/created application/json"
BENCH_DURATION=5s bench_wrk "  (warm-up)" "http://127.0.0.1:$nginx_port/created" >/dev/null
# shellcheck disable=SC2046
bench_wrk "  nginx, a same-sized static GET" "http://127.0.0.1:$nginx_port/created" "" $(bench_nginx_pids "$work")
echo "  creates without endpoints / nginx: $(bench_ratio "$(median "${without[@]}")" "$BENCH_RPS")"

echo "peak RSS: catalog-server $(bench_rss "$ours") (now $(rss_now "$ours")), nginx $(bench_nginx_rss "$work")"
