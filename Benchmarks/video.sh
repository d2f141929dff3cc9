#!/usr/bin/env bash
# Hosted video, in one run, on files made here (random bytes, and clips made by ffmpeg):
#   1. Range reads of a 1 GiB file over keep-alive: random 1 MiB ranges (wrk, 8 connections),
#      from a ready video's MP4 (our server: sendfile) and the same file from nginx as Debian
#      configures it (`sendfile on`), in turns; and nginx with `sendfile off` once.
#      Target: ≥ 80% of nginx's throughput.
#   2. A 1 GiB upload in 8 MiB chunks: tus PATCHes over one keep-alive connection (curl),
#      against the same chunks PUT to nginx with client_body_in_file_only on (WebDAV PUT, so
#      nginx keeps the file as we do, without syncing it); and what the disk does when each
#      chunk is written and fdatasync'd, as an upload's durable offset needs. Target: ≥ 70%
#      of nginx's throughput; our server's peak RSS under 128 MiB.
#   3. Packaging a 60-second 1080p clip: the server's time (its worker's log line: the job
#      from its claim to ready) against the same ffmpeg runs by hand
#      (`catalog-server video-commands`), in turns. Target: within 1.1×. Then once more
#      while other clients GET an item (8 connections at 500 requests/s each): target p99
#      ≤ 25 ms.
# Usage: Benchmarks/video.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2 BENCH_WORKERS=1;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3 ffmpeg curl
bench_server

work=$(mktemp -d)
chmod 755 "$work"
database="$work/catalog.sqlite"
media="$work/media"
ours_port=18690 nginx_port=18691
ours=
trap '[ -n "$ours" ] && kill $ours 2>/dev/null; bench_nginx_stop "$work"; rm -rf "$work"' EXIT

"$server" migrate --database "$database" >/dev/null
key=$("$server" keys create --role admin --name bench --database "$database" 2>/dev/null)
"$server" --port "$ours_port" --loop-threads "$BENCH_WORKERS" --database "$database" --media-directory "$media" --no-seed \
    --log-level notice --rate-limits off > "$work/server.log" 2>&1 &
ours=$!
bench_wait_port "$ours_port"
base="http://127.0.0.1:$ours_port"
auth=(-H "Authorization: Bearer $key")
item() {
    curl -sf "${auth[@]}" -H 'Content-Type: application/json' -X POST "$base/v1/playable-items" \
        -d '{"title":"Hosted","streamURL":"https://example.com/v"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'
}
# wait_ready ITEM: waits until the item's video is ready; prints the video's id. (Once a
# second, with curl and grep alone: the wait must not take CPU from the job it waits for.)
wait_ready() {
    local document
    for _ in $(seq 1 600); do
        document=$(curl -sf "$base/v1/playable-items/$1")
        if grep -q '"status":"ready"' <<<"$document"; then
            grep -o '"video":{[^}]*"id":"[0-9a-f]*"' <<<"$document" | grep -o '[0-9a-f]\{32\}' | tail -1
            return 0
        fi
        grep -q '"status":"failed"' <<<"$document" && { echo "the video failed: $document" >&2; return 1; }
        sleep 1
    done
    echo "the video did not become ready" >&2
    return 1
}

echo "== 1. Range reads of a 1 GiB file =="
head -c $((1 << 30)) /dev/urandom > "$work/big.bin"
ffmpeg -nostdin -v error -y -f lavfi -i testsrc=size=320x180:rate=25:duration=1 -c:v libx264 -preset ultrafast "$work/tiny.mp4"
ranges_item=$(item)
curl -sf "${auth[@]}" -T "$work/tiny.mp4" -X POST "$base/v1/playable-items/$ranges_item/video" >/dev/null
video=$(wait_ready "$ranges_item")
# The ready video's MP4 becomes the 1 GiB file (the same inode nginx serves).
ln -f "$work/big.bin" "$media/videos/$video/media/video.mp4"
mkdir -p "$work/www"
ln -f "$work/big.bin" "$work/www/big.mp4"
# nginx as Debian ships it (`sendfile on`), as we send files; with `sendfile off` once too,
# for what a copy through user space does on loopback.
nginx_files() {
    bench_nginx_stop "$work"
    sleep 0.3
    cat > "$work/nginx-files.conf" <<CONF
worker_processes $BENCH_WORKERS; pid $work/nginx.pid; error_log $work/nginx-error.log; daemon on;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 1000000; client_body_temp_path $work/tmp; sendfile $1;
  server { listen 127.0.0.1:$nginx_port; location = /big.mp4 { default_type video/mp4; alias $work/www/big.mp4; } } }
CONF
    mkdir -p "$work/tmp"
    /usr/sbin/nginx -c "$work/nginx-files.conf" -p "$work"
    sleep 0.3
}
nginx_files on
cat > "$work/ranges.lua" <<'LUA'
math.randomseed(42)
request = function()
    local first = math.random(0, 1023) * 1048576
    return wrk.format(nil, nil, { ["Range"] = "bytes=" .. first .. "-" .. (first + 1048575) })
end
LUA
BENCH_CONNECTIONS=8 bench_scenario "Random 1 MiB ranges (206), 8 connections, nginx with sendfile on" "≥ 80%" \
    "$base/v1/videos/$video/media/video.mp4" "$work/ranges.lua" "http://127.0.0.1:$nginx_port/big.mp4" "$work/ranges.lua"
nginx_files off
# shellcheck disable=SC2046
BENCH_CONNECTIONS=8 bench_wrk "  nginx (sendfile off)" "http://127.0.0.1:$nginx_port/big.mp4" "$work/ranges.lua" $(bench_nginx_pids "$work")
bench_nginx_stop "$work"
sleep 0.5

echo "== 2. A 1 GiB upload in 8 MiB chunks =="
mkdir -p "$work/chunks" "$work/dav"
split -b 8M -d -a 3 "$work/big.bin" "$work/chunks/chunk-"
chunks=("$work"/chunks/chunk-*)
cat > "$work/nginx-dav.conf" <<CONF
worker_processes $BENCH_WORKERS; pid $work/nginx.pid; error_log $work/nginx-error.log; daemon on;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 1000000; client_body_temp_path $work/dav-tmp; client_max_body_size 0;
  server { listen 127.0.0.1:$nginx_port; location /upload/ { root $work/dav; dav_methods PUT; client_body_in_file_only on; create_full_put_path on; } } }
CONF
mkdir -p "$work/dav-tmp" "$work/dav/upload"
chmod -R 777 "$work/dav-tmp" "$work/dav"  # nginx's workers write there
/usr/sbin/nginx -c "$work/nginx-dav.conf" -p "$work"
sleep 0.3
upload_ours() {
    local upload_item location args=()
    upload_item=$(item)
    location=$(curl -sf "${auth[@]}" -H 'Tus-Resumable: 1.0.0' -H "Upload-Length: $((1 << 30))" -X POST -D - -o /dev/null \
        "$base/v1/playable-items/$upload_item/video" | awk 'tolower($1) == "location:" {print $2}' | tr -d '\r')
    local offset=0
    for chunk in "${chunks[@]}"; do
        args+=(--next -s -o /dev/null -w '%{http_code}\n' "${auth[@]}" -H 'Tus-Resumable: 1.0.0' -H 'Content-Type: application/offset+octet-stream'
            -H "Upload-Offset: $offset" -X PATCH --data-binary "@$chunk" "$base$location")
        offset=$((offset + $(stat -c %s "$chunk")))
    done
    curl "${args[@]:1}" | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}'
}
upload_nginx() {
    local args=()
    for chunk in "${chunks[@]}"; do
        args+=(--next -s -o /dev/null -w '%{http_code}\n' -T "$chunk" "http://127.0.0.1:$nginx_port/upload/$(basename "$chunk")")
    done
    curl "${args[@]:1}" | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}'
}
ratios=()
for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
    sync
    start=$(date +%s.%N); statuses=$(upload_ours); ours_s=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
    sync
    start=$(date +%s.%N); nginx_statuses=$(upload_nginx); nginx_s=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
    rm -f "$work"/dav/upload/*
    ratio=$(awk -v a="$ours_s" -v b="$nginx_s" 'BEGIN { printf "%.1f", 100 * b / a }')
    ratios+=("$ratio")
    printf '  round %s: catalog-server %ss (%s MB/s; %s)   nginx %ss (%s MB/s; %s)   ours/nginx %s%%\n' "$round" \
        "$ours_s" "$(awk -v t="$ours_s" 'BEGIN { printf "%.0f", 1073.741824 / t }')" "$statuses" \
        "$nginx_s" "$(awk -v t="$nginx_s" 'BEGIN { printf "%.0f", 1073.741824 / t }')" "$nginx_statuses" "$ratio"
done
echo "  ours/nginx: $(printf '%s%% ' "${ratios[@]}")-> mean $(printf '%s\n' "${ratios[@]}" | awk '{ s += $1 } END { printf "%.1f%%", s / NR }')   (target ≥ 70%)"
echo "  catalog-server peak RSS: $(bench_rss "$ours")   (target < 128 MiB)"
# What this disk does when every 8 MiB must be durable (as an upload's offset is, and nginx's
# bodies are not): each chunk written and fdatasync'd.
disk_s=$(python3 - "$work/disk.bin" "${chunks[@]}" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
start = time.time()
for chunk in sys.argv[2:]:
    os.write(fd, open(chunk, "rb").read())
    os.fdatasync(fd)
print("%.2f" % (time.time() - start))
PY
)
rm -f "$work/disk.bin"
echo "  the disk alone, each chunk written and fdatasync'd: ${disk_s}s ($(awk -v t="$disk_s" 'BEGIN { printf "%.0f", 1073.741824 / t }') MB/s): ours is $(awk -v a="$ours_s" -v b="$disk_s" 'BEGIN { printf "%.1f%%", 100 * b / a }') of it (last round)"
bench_nginx_stop "$work"
rm -rf "$work/chunks" "$work/big.bin" "$work/www" "$media/uploads"/* "$media/videos"/*/source
sleep 0.5

echo "== 3. Packaging a 60-second 1080p clip =="
ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30:duration=60 -f lavfi -i sine=frequency=440:duration=60 \
    -c:v libx264 -preset ultrafast -crf 23 -c:a aac -shortest -movflags +faststart "$work/clip.mp4"
reader_item=$(item)
cat > "$work/paced.lua" <<'LUA'
-- Each connection at most 500 requests/s (a 2 ms delay between them).
delay = function() return 2 end
LUA
# package_on_server: uploads the clip to a new item and waits until it is ready; prints the
# worker's own time for the job (from its log line).
package_on_server() {
    local clip_item video
    clip_item=$(item)
    curl -sf "${auth[@]}" -T "$work/clip.mp4" -X POST "$base/v1/playable-items/$clip_item/video" >/dev/null
    video=$(wait_ready "$clip_item")
    grep -o "Video $video is ready ([0-9.]* seconds)" "$work/server.log" | grep -o '[0-9][0-9.]*' | tail -1
}
package_by_hand() {
    rm -rf "$work/by-hand" && mkdir -p "$work/by-hand"
    local start
    start=$(date +%s.%N)
    "$server" video-commands "$work/clip.mp4" "$work/by-hand" > "$work/commands.sh"
    for rendition in 360p 720p 1080p; do mkdir -p "$work/by-hand/$rendition"; done
    bash "$work/commands.sh"
    awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'
}
for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
    server_s=$(package_on_server)
    hand_s=$(package_by_hand)
    printf '  round %s: catalog-server %.2fs, the same ffmpeg runs by hand %ss: %s\n' "$round" "$server_s" "$hand_s" \
        "$(awk -v a="$server_s" -v b="$hand_s" 'BEGIN { printf "%.2f×", a / b }')"
done
echo "  (target: within 1.1× by hand)"
# Readers while the server packages (it ends well within 120 s; they are stopped then).
wrk -t1 -c8 -d120s --latency -s "$work/paced.lua" "$base/v1/playable-items/$reader_item" > "$work/readers.txt" &
readers=$!
sleep 1
server_s=$(package_on_server)
kill -INT "$readers"
wait "$readers" || true
printf '  GET an item while the server packages (%.2fs): %s req/s, p50 %s, p99 %s, non-2xx %s   (target p99 ≤ 25 ms)\n' "$server_s" \
    "$(awk '/^Requests\/sec:/ {print $2}' "$work/readers.txt")" "$(awk '$1 == "50%" {print $2}' "$work/readers.txt")" \
    "$(awk '$1 == "99%" {print $2}' "$work/readers.txt")" "$(awk '/Non-2xx/ {print $NF}' "$work/readers.txt" | grep . || echo 0)"
