#!/usr/bin/env bash
# GET /healthz on our server vs nginx serving the same body from a static file.
# Usage: Benchmarks/http-healthz.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2 BENCH_WORKERS=1)
# Prints requests/s, p50/p99, each server's CPU µs per request, peak RSS and ours/nginx per round (interleaved runs, so both
# see the same machine noise).
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require
bench_server

work=$(mktemp -d)
ours_port=18180 nginx_port=18181
ours=
trap '[ -n "$ours" ] && kill $ours 2>/dev/null; bench_nginx_stop "$work"; rm -rf "$work"' EXIT
printf 'ok' > "$work/healthz"
bench_nginx "$work" "$nginx_port" "/healthz $work/healthz text/plain;charset=utf-8"
"$server" --port "$ours_port" --loop-threads "$BENCH_WORKERS" --database "$work/catalog.sqlite" --log-level warning --rate-limits off >/dev/null &
ours=$!
bench_wait_port "$ours_port"

bench_same_body "http://127.0.0.1:$ours_port/healthz" "http://127.0.0.1:$nginx_port/healthz"
echo "warm-up"
BENCH_DURATION=3s bench_wrk "catalog-server (warm-up)" "http://127.0.0.1:$ours_port/healthz" >/dev/null
BENCH_DURATION=3s bench_wrk "nginx (warm-up)" "http://127.0.0.1:$nginx_port/healthz" >/dev/null

for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
    echo "round $round: wrk -t1 -c$BENCH_CONNECTIONS -d$BENCH_DURATION --latency GET /healthz"
    bench_wrk "catalog-server" "http://127.0.0.1:$ours_port/healthz" "" "$ours"; ours_rps=$BENCH_RPS
    # shellcheck disable=SC2046
    bench_wrk "nginx" "http://127.0.0.1:$nginx_port/healthz" "" $(bench_nginx_pids "$work"); nginx_rps=$BENCH_RPS
    echo "ours/nginx: $(bench_ratio "$ours_rps" "$nginx_rps")"
done
echo "peak RSS: catalog-server $(bench_rss $ours), nginx $(bench_nginx_rss "$work")"
