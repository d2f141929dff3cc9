# Shared helpers for the benchmark scripts: start nginx beside our server, drive both
# with wrk, and print requests/s, latency percentiles, peak RSS and the ratio.
# Sourced, not run. Needs: wrk, nginx (Debian packages).

# bench_require [COMMAND...]: installs wrk, nginx and each COMMAND (a Debian package of
# that name) that this machine lacks.
bench_require() {
    local missing=()
    for command in "$@"; do command -v "$command" >/dev/null || missing+=("$command"); done
    command -v wrk >/dev/null || missing+=(wrk)
    [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing ${missing[*]}" >&2
        apt-get update -qq
        apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# bench_build PRODUCT: builds PRODUCT as the image ships it (the Dockerfile's flags: release,
# Swift's runtime and Foundation linked in statically; in the image check's build
# directory, `.build-image`) and prints its path. Under catalog.sh (10,000 items) its peak
# RSS was 48.6–48.7 MB against 54.6–57.5 MB for a build against the toolchain's shared
# libraries (interleaved runs), for the same instructions per request within 1%.
bench_build() {
    swift build -c release --static-swift-stdlib --scratch-path .build-image --product "$1" >/dev/null
    echo "$(swift build -c release --static-swift-stdlib --scratch-path .build-image --show-bin-path)/$1"
}

# bench_server: sets `server` to the catalog-server measured: CATALOG_SERVER (a prebuilt
# one, such as an earlier commit's), else this checkout's build as the image ships it, built now.
bench_server() {
    server=${CATALOG_SERVER:-}
    [ -n "$server" ] || server=$(bench_build catalog-server)
}

# Both servers run without access logs (nginx: access_log off; ours: --log-level warning).
# Worker threads/processes for both servers. wrk itself keeps one of this machine's two
# cores busy, so one worker each is the fair, uncontended default.
BENCH_WORKERS=${BENCH_WORKERS:-1}

# bench_nginx DOCROOT PORT LOCATIONS... : starts nginx serving static files with keep-alive.
# Each LOCATION is "URI FILE CONTENT_TYPE"; when FILE is a directory, URI is a prefix
# served from that root (the file for /a/b is ROOT/a/b). BENCH_NGINX_HEADERS, when set, is
# added to every location (`add_header …;` directives: the fields our answer carries).
bench_nginx() {
    local root=$1 port=$2; shift 2
    local conf="$root/nginx.conf" locations=("$@")
    {
        echo "worker_processes $BENCH_WORKERS; pid $root/nginx.pid; error_log $root/nginx-error.log; daemon on;"
        echo "events { worker_connections 4096; }"
        echo "http { access_log off; keepalive_requests 1000000; keepalive_timeout 75s;"
        echo "  client_body_temp_path $root/tmp; proxy_temp_path $root/tmp; fastcgi_temp_path $root/tmp;"
        echo "  uwsgi_temp_path $root/tmp; scgi_temp_path $root/tmp;"
        if [ -n "${BENCH_NGINX_TLS:-}" ]; then
            # BENCH_NGINX_TLS="CERTIFICATE KEY": TLS as catalog-server speaks it (Mozilla intermediate, tickets, no cache).
            set -- $BENCH_NGINX_TLS
            echo "  server { listen 127.0.0.1:$port ssl; server_tokens off; ssl_certificate $1; ssl_certificate_key $2;"
            echo "    ssl_protocols TLSv1.2 TLSv1.3; ssl_prefer_server_ciphers on; ssl_session_tickets on; ssl_session_cache off;"
            echo "    ssl_ecdh_curve X25519:prime256v1:secp384r1;"
            echo "    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305;"
            set -- "${locations[@]}"
        else
            echo "  server { listen 127.0.0.1:$port; server_tokens off;"
        fi
        for location in "$@"; do
            set -- $location
            if [ -d "$2" ]; then
                echo "    location $1 { default_type \"$3\"; root $2; ${BENCH_NGINX_HEADERS:-} }"
            else
                echo "    location = $1 { default_type \"$3\"; alias $2; ${BENCH_NGINX_HEADERS:-} }"
            fi
        done
        echo "  } }"
    } > "$conf"
    mkdir -p "$root/tmp"
    chmod -R a+rX "$root"
    /usr/sbin/nginx -c "$conf" -p "$root"
    sleep 0.3
}

bench_nginx_stop() {
    local root=$1
    [ -f "$root/nginx.pid" ] && kill "$(cat "$root/nginx.pid")" 2>/dev/null || true
}

# bench_wait_port PORT: waits until something listens on 127.0.0.1:PORT.
bench_wait_port() {
    for _ in $(seq 1 100); do
        (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on port $1" >&2
    return 1
}

# bench_wrk NAME URL [SCRIPT [PID...]]: runs wrk, prints one result line, stores rps in
# BENCH_RPS. With PIDs (the server's processes), it also prints the CPU time they spent
# per request (user + system, from /proc), stored in BENCH_CPU_US: steadier than req/s
# on a shared machine, since another tenant's load does not count.
BENCH_DURATION=${BENCH_DURATION:-10s}
BENCH_CONNECTIONS=${BENCH_CONNECTIONS:-32}
bench_wrk() {
    local name=$1 url=$2 script=${3:-}
    local pids=("${@:4}")
    local args=(-t1 -c"$BENCH_CONNECTIONS" -d"$BENCH_DURATION" --latency)
    [ -n "$script" ] && args+=(-s "$script")
    local out before=0
    [ ${#pids[@]} -gt 0 ] && before=$(bench_cpu_ticks "${pids[@]}")
    out=$(wrk "${args[@]}" "$url")
    BENCH_RPS=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    BENCH_CPU_US=
    if [ ${#pids[@]} -gt 0 ]; then
        local ticks requests
        ticks=$(( $(bench_cpu_ticks "${pids[@]}") - before ))
        requests=$(awk '/requests in/ {print $1}' <<<"$out")
        BENCH_CPU_US=$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN { printf "%.1f", t * 1000000 / hz / n }')
    fi
    local p50 p99 non2xx errors
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"$out")
    errors=$(awk '/Socket errors:/ {print $0}' <<<"$out")
    printf '%-28s %10s req/s   p50 %8s   p99 %8s   non-2xx %s%s%s\n' "$name" "$BENCH_RPS" "$p50" "$p99" "${non2xx:-0}" \
        "${BENCH_CPU_US:+   CPU $BENCH_CPU_US µs/req}" "${errors:+   $errors}"
}

# bench_cpu_ticks PID...: the user + system clock ticks the processes have used.
bench_cpu_ticks() {
    local total=0
    for pid in "$@"; do total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done
    echo "$total"
}

# bench_nginx_pids ROOT: nginx's master and worker processes.
bench_nginx_pids() {
    local master
    master=$(cat "$1/nginx.pid")
    echo "$master" $(pgrep -P "$master")
}

# bench_rss PID: peak resident set size in KiB.
bench_rss() {
    awk '/^VmHWM:/ {print $2 " " $3}' "/proc/$1/status"
}

# bench_nginx_rss ROOT: peak RSS summed over nginx's processes.
bench_nginx_rss() {
    local total=0
    for pid in $(bench_nginx_pids "$1"); do
        total=$((total + $(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
    done
    echo "$total kB"
}

# bench_scenario TITLE TARGET OURS_URL OURS_SCRIPT NGINX_URL [NGINX_SCRIPT]: warm-up, then
# interleaved rounds of ours (pid $ours) and nginx (root $work); prints each round's ratio
# and their mean, and our CPU time per request.
bench_scenario() {
    local title=$1 target=$2 ours_url=$3 ours_script=$4 nginx_url=$5 nginx_script=${6:-}
    echo "$title"
    BENCH_DURATION=5s bench_wrk "  (warm-up)" "$ours_url" "$ours_script" >/dev/null
    BENCH_DURATION=5s bench_wrk "  (warm-up)" "$nginx_url" "$nginx_script" >/dev/null
    local ratios=() cpu=() nginx_cpu=()
    for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
        bench_wrk "  catalog-server" "$ours_url" "$ours_script" "$ours"; local a=$BENCH_RPS
        cpu+=("$BENCH_CPU_US")
        # shellcheck disable=SC2046
        bench_wrk "  nginx" "$nginx_url" "$nginx_script" $(bench_nginx_pids "$work"); local b=$BENCH_RPS
        nginx_cpu+=("$BENCH_CPU_US")
        ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", 100 * a / b }')")
    done
    echo "  ours/nginx: $(printf '%s%% ' "${ratios[@]}")-> mean $(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.1f%%", s / NR }')   (target $target)"
    echo "  CPU per request: catalog-server $(printf '%s ' "${cpu[@]}")-> mean $(printf '%s\n' "${cpu[@]}" | awk '{ s += $1 } END { printf "%.1f", s / NR }') µs;" \
        "nginx $(printf '%s ' "${nginx_cpu[@]}")-> mean $(printf '%s\n' "${nginx_cpu[@]}" | awk '{ s += $1 } END { printf "%.1f", s / NR }') µs"
}

bench_ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f%%", 100 * a / b }'
}

# bench_same_body URL_A URL_B: both answer 200 with identical bodies, or the run stops
# (over https, trusting the CA file BENCH_CA).
bench_same_body() {
    local a b
    local ca=()
    [ -n "${BENCH_CA:-}" ] && ca=(--cacert "$BENCH_CA")
    a=$(curl -sf "${ca[@]}" "$1") || { echo "GET $1 failed" >&2; return 1; }
    b=$(curl -sf "${ca[@]}" "$2") || { echo "GET $2 failed" >&2; curl -si "${ca[@]}" "$2" >&2; return 1; }
    [ "$a" = "$b" ] || { echo "bodies differ: $1 vs $2" >&2; return 1; }
}

# bench_seed_items DATABASE COUNT: COUNT playable items written straight into a migrated,
# not yet served database (no second process ever opens a live file). Their search terms
# wait in search_index_queue until the server (or `keys create`) next opens the file,
# which indexes all of them in one statement.
bench_seed_items() {
    sqlite3 "$1" <<SQL
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
INSERT INTO playable_items (id, title, description, stream_url, thumbnail_url, duration_seconds, created_at, updated_at, version)
SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
             || substr('89ab', 1 + abs(random()) % 4, 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
       'Sample video ' || i,
       'Sample video number ' || i || ', a typical catalog entry with a sentence or two of description for the player screen.',
       'https://videos.example.com/' || i || '/master.m3u8', 'https://videos.example.com/' || i || '/poster.jpg',
       60 + i % 3600, 1763000000000 + i * 1000, 1763000000000 + i * 1000, 1
FROM n;
SQL
}

# bench_both_engines WORK COUNT CLUSTER_PORT: COUNT identical playable items in a SQLite file
# (WORK/catalog.sqlite) and in a throwaway PostgreSQL cluster (WORK/cluster, on
# CLUSTER_PORT, started by .ci/postgres.sh), both migrated by `$server`; sets `url` to the
# cluster's database.
bench_both_engines() {
    local work=$1 count=$2 port=$3
    "$server" migrate --database "$work/catalog.sqlite" >/dev/null
    bench_seed_items "$work/catalog.sqlite" "$count"
    url=$(bash .ci/postgres.sh "$work/cluster" "$port")
    "$server" migrate --database "$url" >/dev/null
    sqlite3 -csv "$work/catalog.sqlite" \
        "SELECT id, title, description, stream_url, thumbnail_url, duration_seconds, created_at, updated_at, version FROM playable_items" > "$work/items.csv"
    psql -q "$url" -c "\\copy playable_items (id, title, description, stream_url, thumbnail_url, duration_seconds, created_at, updated_at, version) FROM '$work/items.csv' CSV"
}

# bench_admin_key SERVER DATABASE: a new admin API key on the (stopped) server's database,
# for the writes a benchmark makes.
bench_admin_key() {
    "$1" keys create --role admin --name bench --database "$2" 2>/dev/null
}

# What the write benchmarks create: one playable item.
BENCH_POST_BODY='{"title":"Benchmark upload","description":"Posted by wrk.","streamURL":"https://videos.example.com/new/master.m3u8","durationSeconds":42}'

# bench_post_script FILE KEY: a wrk script that POSTs BENCH_POST_BODY to the URL it is
# given, as the holder of the API key KEY.
bench_post_script() {
    cat > "$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $2"
wrk.body = '$BENCH_POST_BODY'
LUA
}
