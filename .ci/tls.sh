#!/usr/bin/env bash
# The TLS listener against the checks an operator would run against nginx:
#   - sslyze (pinned, PyPI) must find it compliant with Mozilla's "intermediate" configuration;
#   - testssl.sh (Debian) must report no HIGH or CRITICAL finding.
# The certificate is made here with the openssl CLI (.ci/certificate.sh) under a CA both
# tools are told to trust.
# One line per tool on success; everything they printed on failure.
# Usage: .ci/tls.sh path/to/catalog-server
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
server=$(realpath "$1")
command -v testssl >/dev/null || { apt-get update -qq && apt-get install -y -qq testssl.sh >/dev/null; }
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore sslyze==6.3.1

work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
bash "$root/.ci/certificate.sh" "$work"
cd "$work"

"$server" --port 0 --database "$work/catalog.sqlite" --migrations "$root/Migrations" --rate-limits off --hsts \
    --tls-certificate server.pem --tls-private-key server.key > server.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    port=$(grep -o 'listening on https://127.0.0.1:[0-9]*' server.log | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "${port:-}" ] || { cat server.log; echo "the server did not start" >&2; exit 1; }
# The image's HEALTHCHECK speaks TLS when the certificate is configured.
CATALOG_PORT=$port CATALOG_TLS_CERTIFICATE=server.pem "$server" healthcheck >/dev/null || { echo "healthcheck over TLS failed" >&2; exit 1; }

if python3 -m sslyze --mozilla_config=intermediate --certinfo_ca_file ca.pem "localhost:$port" > sslyze.txt 2>&1 \
    && grep -q "OK - Compliant" sslyze.txt; then
    echo "sslyze: compliant with Mozilla's intermediate configuration"
else
    cat sslyze.txt
    echo "sslyze: not compliant with Mozilla's intermediate configuration" >&2
    exit 1
fi

testssl --quiet --color 0 --warnings off --add-ca "$work/ca.pem" --jsonfile testssl.json "https://localhost:$port" > testssl.txt 2>&1 || true
if ! python3 - testssl.json <<'PY'
import collections, json, sys
findings = json.load(open(sys.argv[1]))
counts = collections.Counter(finding["severity"] for finding in findings)
bad = [finding for finding in findings if finding["severity"] in ("HIGH", "CRITICAL", "FATAL")]
for finding in bad:
    print(f'{finding["severity"]} {finding["id"]}: {finding["finding"]}', file=sys.stderr)
if not findings or bad:
    sys.exit(1)
print("testssl.sh: no HIGH or CRITICAL finding (" + ", ".join(f"{count} {severity}" for severity, count in sorted(counts.items())) + ")")
PY
then
    cat testssl.txt
    echo "testssl.sh: HIGH or CRITICAL findings (above)" >&2
    exit 1
fi
