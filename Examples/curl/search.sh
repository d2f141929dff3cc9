#!/usr/bin/env bash
# Full-text search over playable items (titles and descriptions), best match first.
# Every word must match as a prefix: "bun" finds "Big Buck Bunny".
# Usage: CATALOG_URL=http://127.0.0.1:8080 ./search.sh "search words"
set -euo pipefail
url=${CATALOG_URL:-http://127.0.0.1:8080}
curl -sfG "$url/v1/playable-items" --data-urlencode "q=${1:?search words}" | jq -r '.items[].title'
