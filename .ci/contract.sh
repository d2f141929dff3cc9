#!/usr/bin/env bash
# The contract, enforced: schemathesis (pinned) against a live release server on a
# fresh database (demo catalog loaded), with every check, every phase (stateful
# included) and a fixed seed, as an admin; it must finish with no failure. Then, without
# credentials and with a bad one, every operation that needs a credential must refuse
# with the documented 401.
# Settings and the hooks: .ci/schemathesis/. Runs of it at once do not share anything:
# each works in a copy of the settings (schemathesis keeps its caches beside them).
# Usage: .ci/contract.sh path/to/release/catalog-server
#   env: CATALOG_DATABASE, an empty PostgreSQL database to run on instead of a new SQLite file
#        CATALOG_CONTRACT_EXAMPLES, examples per operation in the fuzzing and stateful
#        phases (default: the settings' 100)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
server=$(realpath "$1")
# One install at a time: two at once into the same site-packages can break it.
flock /tmp/catalog-contract-pip.lock \
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore schemathesis==4.32.5

work=$(mktemp -d)
cp -R "$root/.ci/schemathesis" "$work/settings"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
# The first admin, created offline before the server holds the database; only the key
# goes to standard output.
database=${CATALOG_DATABASE:-$work/catalog.sqlite}
key=$("$server" keys create --role admin --name ci --database "$database" --migrations "$root/Migrations")
"$server" --port 0 --database "$database" --migrations "$root/Migrations" --rate-limits off \
    > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "${port:-}" ] || { cat "$work/server.log"; echo "the server did not start" >&2; exit 1; }
url="http://127.0.0.1:$port"

# The admin's user and key, which the run must not delete, demote or revoke (hooks.py).
CATALOG_CI_USER_ID=$(curl -sf -H "Authorization: Bearer $key" "$url/v1/me" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
CATALOG_CI_KEY_ID=$(curl -sf -H "Authorization: Bearer $key" "$url/v1/api-keys" | python3 -c 'import json, sys; print(json.load(sys.stdin)["items"][0]["id"])')
export CATALOG_CI_USER_ID CATALOG_CI_KEY_ID

# Every operation as the admin, but DELETE /v1/me: it would delete the admin and revoke
# its key, and every request after it would get a 401 (a documented answer, so no check
# would fail) and test nothing. Its other ways out are guarded by hooks.py.
# On PostgreSQL, POST /admin/backups answers its documented 501 (backupsNotOffered), which
# schemathesis counts as a server error whatever the contract says: the API tests check it.
excluded=(--exclude-operation-id deleteCurrentUser)
[[ "$database" == postgres* ]] && excluded+=(--exclude-operation-id createBackup)
examples=()
[ -n "${CATALOG_CONTRACT_EXAMPLES:-}" ] && examples=(--max-examples "$CATALOG_CONTRACT_EXAMPLES")
cd "$work/settings"
PYTHONPATH=. schemathesis run "$root/openapi.yaml" --url "$url" --checks all \
    --phases examples,coverage,fuzzing,stateful --no-color \
    -H "Authorization: Bearer $key" "${excluded[@]}" "${examples[@]}"

# Without a credential every write (and every read that is not public) is a 401
# `unauthenticated`; with a credential that is no good, a 401 `invalidToken`.
python3 - "$root/openapi.yaml" "$url" <<'PYTHON'
import json
import sys
import urllib.error
import urllib.request
import uuid

import yaml

contract, url = sys.argv[1], sys.argv[2]
document = yaml.safe_load(open(contract))
methods = {"get", "put", "post", "patch", "delete"}
failures, checked = [], 0

def send(method, path, media_type, authorization):
    headers = {"Accept": "application/json"}
    body = None
    if media_type is not None:
        headers["Content-Type"] = media_type
        body = b"{}"
    if authorization is not None:
        headers["Authorization"] = authorization
    request = urllib.request.Request(url + path, data=body, method=method.upper(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()

for template, item in document["paths"].items():
    for method, operation in item.items():
        if method not in methods:
            continue
        security = operation.get("security", document.get("security", []))
        label = f"{method.upper()} {template}"
        if security == [] or {} in security:
            # Open (health, the contract) or public reads: nothing to refuse. A write anyone
            # may send says why, in `x-anonymous-write` (a player's view report).
            if method != "get" and not operation.get("x-anonymous-write"):
                failures.append(f"{label}: a write that needs no credential")
            continue
        path = template
        for parameter in [p for p in item.get("parameters", []) + operation.get("parameters", []) if p.get("in") == "path"] or []:
            path = path.replace("{" + parameter["name"] + "}", str(uuid.uuid4()))
        while "{" in path:  # path parameters declared by reference
            start = path.index("{")
            path = path[:start] + str(uuid.uuid4()) + path[path.index("}", start) + 1:]
        media_types = list(operation.get("requestBody", {}).get("content", {}))
        media_type = media_types[0] if media_types else None
        for authorization, code, challenge in [
            (None, "unauthenticated", 'Bearer realm="catalog"'),
            ("Bearer garbage", "invalidToken", 'Bearer realm="catalog", error="invalid_token"'),
        ]:
            checked += 1
            status, headers, body = send(method, path, media_type, authorization)
            sent = f"{method.upper()} {path}" + (" with a bad token" if authorization else " without a credential")
            try:
                problem = json.loads(body)
            except ValueError:
                problem = {}
            problems = []
            if status != 401:
                problems.append(f"status {status}")
            if headers.get("WWW-Authenticate") != challenge:
                problems.append(f"WWW-Authenticate {headers.get('WWW-Authenticate')!r}")
            if (headers.get("Content-Type") or "").split(";")[0] != "application/problem+json":
                problems.append(f"Content-Type {headers.get('Content-Type')!r}")
            if problem.get("code") != code or problem.get("status") != 401:
                problems.append(f"body {body[:200]!r}")
            if problems:
                failures.append(f"{sent}: expected 401 {code} with {challenge!r}, got " + ", ".join(problems))

print(f"credentials: {checked} requests, {len(failures)} failures")
for failure in failures:
    print("FAILED:", failure, file=sys.stderr)
sys.exit(1 if failures or checked == 0 else 0)
PYTHON

# The server survived all of it and still answers, and the admin's key still works.
curl -sf "$url/healthz" >/dev/null
curl -sf -H "Authorization: Bearer $key" "$url/v1/me" >/dev/null
