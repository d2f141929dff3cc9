#!/usr/bin/env bash
# Pages through every playable item, following nextCursor, and prints one title a line.
# Usage: CATALOG_URL=http://127.0.0.1:8080 ./list-items.sh [page-size]
set -euo pipefail
url=${CATALOG_URL:-http://127.0.0.1:8080}
limit=${1:-5}
cursor=""
pages=0
while :; do
    # -G with --data-urlencode builds the query string; the cursor is opaque: pass it back as is.
    page=$(curl -sfG "$url/v1/playable-items" --data-urlencode "limit=$limit" ${cursor:+--data-urlencode "cursor=$cursor"})
    pages=$((pages + 1))
    jq -r '.items[].title' <<<"$page"
    cursor=$(jq -r '.nextCursor // empty' <<<"$page")
    [ -n "$cursor" ] || break
done
echo "pages: $pages"
