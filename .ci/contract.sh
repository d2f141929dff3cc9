#!/usr/bin/env bash
# The contract, enforced: schemathesis (pinned) against a live release server on a
# fresh database (demo catalog loaded), with every check, every phase (stateful
# included) and a fixed seed; it must finish with no failure.
# Settings and the one generation hook: .ci/schemathesis/.
# Usage: .ci/contract.sh path/to/release/catalog-server
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
server=$(realpath "$1")
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore schemathesis==4.32.5

work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
"$server" --port 0 --database "$work/catalog.sqlite" --migrations "$root/Migrations" \
    > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "${port:-}" ] || { cat "$work/server.log"; echo "the server did not start" >&2; exit 1; }

cd "$root/.ci/schemathesis"
PYTHONPATH=. schemathesis run "$root/openapi.yaml" --url "http://127.0.0.1:$port" --checks all \
    --phases examples,coverage,fuzzing,stateful --no-color
# The server survived all of it and still answers.
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null
