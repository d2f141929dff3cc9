#!/usr/bin/env bash
# System calls per request, counted by strace attached to a running server (every thread)
# while it answers, on a 1,000-item database:
#   1. 2,000 keep-alive GETs of one unchanged item, one at a time (curl);
#   2. the same item asked 16 times at once on one connection (pipelined), 100 times over.
# Counts are per request; what the loop waits in (epoll_wait) is shown apart. A server
# answering one keep-alive GET at a time cannot do better than one read and one write;
# 16 pipelined GETs can leave in one write.
# Usage: Benchmarks/syscalls.sh [SERVER...]   (default: this checkout, built as the image ships it;
#        name an earlier commit's build too to compare them side by side)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
command -v strace >/dev/null || { apt-get update -qq; apt-get install -y -qq strace >/dev/null; }
bench_require sqlite3 curl python3
[ $# -gt 0 ] || set -- "$(bench_build catalog-server)"

work=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill $server_pid 2>/dev/null; rm -rf "$work"' EXIT
port=18391
"$1" migrate --database "$work/base.sqlite" >/dev/null
bench_seed_items "$work/base.sqlite" 1000
id=$(sqlite3 "$work/base.sqlite" "SELECT id FROM playable_items ORDER BY id LIMIT 1")
for _ in $(seq 1 2000); do printf 'url = "http://127.0.0.1:%s/v1/playable-items/%s"\noutput = /dev/null\n' "$port" "$id"; done > "$work/get.conf"

# pipelined: 100 rounds of 16 GETs written at once on one connection, each round read whole.
cat > "$work/pipelined.py" <<EOF
import socket
request = b"GET /v1/playable-items/$id HTTP/1.1\r\nHost: bench\r\n\r\n"
connection = socket.create_connection(("127.0.0.1", $port))
for _ in range(100):
    connection.sendall(request * 16)
    answered, buffer = 0, b""
    while answered < 16:
        buffer += connection.recv(1 << 20)
        while True:
            head = buffer.find(b"\r\n\r\n")
            if head < 0:
                break
            length = int([line.split(b":")[1] for line in buffer[:head].split(b"\r\n") if line.lower().startswith(b"content-length:")][0])
            if len(buffer) < head + 4 + length:
                break
            buffer = buffer[head + 4 + length:]
            answered += 1
connection.close()
EOF

# counts SERVER CLIENT REQUESTS: "name per-request ..." for the calls the server made while CLIENT ran.
counts() {
    cp "$work/base.sqlite" "$work/catalog.sqlite"
    "$1" --port $port --loop-threads 1 --database "$work/catalog.sqlite" --no-seed --log-level warning --rate-limits off >/dev/null 2>&1 &
    server_pid=$!
    bench_wait_port $port
    curl -sf "http://127.0.0.1:$port/v1/playable-items/$id" -o /dev/null # the first read fills the caches
    strace -f -c -o "$work/strace.txt" -p $server_pid 2>/dev/null &
    local tracer=$!
    sleep 1
    eval "$2"
    sleep 0.5
    kill -INT $tracer
    wait $tracer 2>/dev/null || true
    kill -TERM $server_pid
    wait $server_pid 2>/dev/null || true
    server_pid=
    # strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
    awk -v n="$3" '$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" && $4 / n >= 0.005 { printf "%s=%.2f ", $NF, $4 / n }' "$work/strace.txt"
    echo
}

for server in "$@"; do
    echo "$server"
    printf '  %-34s %s\n' "keep-alive GET, one at a time:" "$(counts "$server" "curl -sf -K $work/get.conf" 2000)"
    printf '  %-34s %s\n' "pipelined GET, 16 at once:" "$(counts "$server" "python3 $work/pipelined.py" 1600)"
done
