#!/usr/bin/env bash
# Images, in one run, on pictures made here (never downloaded): three 1600 × 1200 photos-like
# PNGs (written by Python), uploaded as games' artwork, so the server keeps JPEG originals.
#   1. GET /v1/images/{hash}?w=640&format=webp, cached, vs nginx serving the same bytes with
#      the same fields (Cache-Control immutable, nosniff, CSP): requests/s and CPU per request.
#      Target ≥ 70% of nginx.
#   2. Making renditions: the server's CPU per rendition (each asked once, so each made),
#      vs vipsthumbnail (libvips-tools, VIPS_CONCURRENCY=1, as the server's pool runs libvips)
#      making the same sizes and formats from the same originals. vipsthumbnail's start-up
#      (loading libvips and its modules, once per process) is measured apart and taken off.
#      Target ≤ 1.25×.
#   3. A burst of 100 clients asking at once for one rendition nobody has asked for: made once
#      (the server's catalog_image_renditions_made_total counts what it makes).
# Usage: Benchmarks/images.sh   (env: BENCH_DURATION=10s BENCH_ROUNDS=2 BENCH_WORKERS=1;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3
command -v vipsthumbnail >/dev/null || { apt-get update -qq && apt-get install -y -qq libvips-tools >/dev/null; }
bench_server

work=$(mktemp -d)
database="$work/catalog.sqlite"
ours_port=18290 nginx_port=18291
ours=
trap '[ -n "$ours" ] && kill $ours 2>/dev/null; bench_nginx_stop "$work"; rm -rf "$work"' EXIT

"$server" migrate --database "$database" >/dev/null
key=$(bench_admin_key "$server" "$database")
"$server" --port "$ours_port" --loop-threads "$BENCH_WORKERS" --database "$database" --no-seed --log-level warning --rate-limits off >/dev/null &
ours=$!
bench_wait_port "$ours_port"
base="http://127.0.0.1:$ours_port"
auth=(-H "Authorization: Bearer $key")

# Three pictures: gradients with texture, each its own.
for n in 1 2 3; do
    python3 - "$work/source-$n.png" "$n" <<'PY'
import struct, sys, zlib
width, height, seed = 1600, 1200, int(sys.argv[2])
rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in (((x + 97 * seed) * 255) // (width + 300), (y * 255) // height, (x * y * seed) % 251))
                for y in range(height))
chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))
PY
done
hashes=()
for n in 1 2 3; do
    game=$(curl -sf "${auth[@]}" -H 'Content-Type: application/json' -d "{\"name\":\"Artwork $n\",\"imageName\":\"a$n\"}" "$base/v1/games" | jq -r .id)
    # Kept as a JPEG original, as a phone's photo would be.
    vips copy "$work/source-$n.png" "$work/upload-$n.jpg[Q=92]"
    hash=$(curl -sf -X PUT "${auth[@]}" -H 'Content-Type: image/jpeg' --data-binary @"$work/upload-$n.jpg" "$base/v1/games/$game/image" | jq -r .image.url | sed 's|.*/||')
    curl -sf "$base/v1/images/$hash" -o "$work/original-$n.jpg"
    hashes+=("$hash")
done
echo "inputs: 3 JPEG originals of 1600 × 1200 ($(du -cb "$work"/original-*.jpg | tail -1 | cut -f1) bytes); workers: $BENCH_WORKERS each"

# 1. A cached rendition, beside nginx serving its bytes with the same fields.
path="/v1/images/${hashes[0]}?w=640&format=webp"
curl -sf "$base$path" -o "$work/rendition.webp"
curl -sf "$base$path" -o /dev/null  # now in memory too
BENCH_NGINX_HEADERS="add_header Cache-Control \"public, max-age=31536000, immutable\"; add_header X-Content-Type-Options nosniff; add_header Content-Security-Policy \"default-src 'none'\";" \
    bench_nginx "$work" "$nginx_port" "/rendition.webp $work/rendition.webp image/webp"
bench_same_body "$base$path" "http://127.0.0.1:$nginx_port/rendition.webp"
bench_scenario "GET $path (cached) vs nginx, same bytes and fields" "≥ 70%" "$base$path" "" "http://127.0.0.1:$nginx_port/rendition.webp"

# 2. Renditions made: each size and format once per original.
widths=(256 384 640 1024) formats=(jpeg webp)
count=0
before=$(bench_cpu_ticks "$ours")
for hash in "${hashes[@]}"; do
    for w in "${widths[@]}"; do
        for f in "${formats[@]}"; do
            curl -sf "$base/v1/images/$hash?w=$w&format=$f&q=80" -o /dev/null
            count=$((count + 1))
        done
    done
done
ours_us=$(awk -v t="$(( $(bench_cpu_ticks "$ours") - before ))" -v hz="$(getconf CLK_TCK)" -v n="$count" 'BEGIN { printf "%.0f", t * 1000000 / hz / n }')
# vipsthumbnail: one process per size and format, all three originals each.
thumbnails() {
    for w in "${widths[@]}"; do
        for f in "${formats[@]}"; do
            local ext=$f options="Q=80,strip"
            [ "$f" = jpeg ] && ext=jpg && options="Q=80,strip,optimize_coding"
            (cd "$work" && VIPS_CONCURRENCY=1 vipsthumbnail original-1.jpg original-2.jpg original-3.jpg -s "${w}x100000" -o "tn-$w-%s.$ext[$options]")
        done
    done
}
# The same number of processes, each shrinking an 8-pixel picture: their start-up alone.
startup() { for _ in "${widths[@]}"; do for _ in "${formats[@]}"; do (cd "$work" && VIPS_CONCURRENCY=1 vipsthumbnail tiny.png -s 4 -o tiny-out.jpg); done; done; }
vips black "$work/tiny.png" 8 8 --bands 3
# children_cpu COMMAND: the user + system seconds of the processes COMMAND ran (bash's `times`).
children_cpu() { ( "$@" >/dev/null 2>&1; times ) | tail -1 | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); t += p[1] * 60 + p[2] } print t }'; }
vips_ticks=$(children_cpu thumbnails)
startup_seconds=$(children_cpu startup)
awk -v ours="$ours_us" -v total="$vips_ticks" -v startup="$startup_seconds" -v n="$count" 'BEGIN {
    raw = total * 1000000 / n; net = (total - startup) * 1000000 / n
    printf "Making renditions (%d: 4 widths × JPEG and WebP × 3 originals)\n", n
    printf "  CPU per rendition: catalog-server %d µs; vipsthumbnail %d µs (%d µs without its start-up)\n", ours, raw, net
    printf "  ours/vipsthumbnail: %.2f× (%.2f× with its start-up)   (target ≤ 1.25×)\n", ours / net, ours / raw
}'

# 3. A burst of 100 clients for one rendition nobody has asked for.
made() { curl -sf "${auth[@]}" "$base/metrics" | awk '$1 == "catalog_image_renditions_made_total" {print $2}'; }
first=$(made)
burst="$base/v1/images/${hashes[1]}?w=768&format=avif"
statuses=$(seq 100 | xargs -P 100 -I{} curl -s -o /dev/null -w '%{http_code}\n' "$burst" | sort | uniq -c | tr -s ' ' | tr '\n' ',')
echo "A burst of 100 clients for one new AVIF rendition: statuses${statuses%,}; made $(( $(made) - first )) time(s)   (target: once)"
echo "peak RSS: catalog-server $(bench_rss $ours), nginx $(bench_nginx_rss "$work")"
