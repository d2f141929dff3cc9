#!/usr/bin/env bash
# Creates a game, then changes it only if nobody else did in between (If-Match), and
# shows what a stale ETag gets: 412 Precondition Failed.
# Usage: CATALOG_URL=http://127.0.0.1:8080 CATALOG_API_KEY=catalog_... ./game-conditional-update.sh   (an editor's or admin's key)
set -euo pipefail
url=${CATALOG_URL:-http://127.0.0.1:8080}
# Writes need an API key: catalog-server keys create (the first admin), catalog keys create or POST /v1/api-keys.
[ -n "${CATALOG_API_KEY:-}" ] || { echo "${0##*/}: set CATALOG_API_KEY to an API key; writes need one" >&2; exit 1; }
auth="Authorization: Bearer $CATALOG_API_KEY"
headers=$(mktemp)
trap 'rm -f "$headers"' EXIT

# Create: 201, with the new game's ETag in the headers.
game=$(curl -sf -D "$headers" -X POST "$url/v1/games" -H "$auth" -H 'Content-Type: application/json' \
    -d '{"name":"Tempest","imageName":"tempest","description":"A tube shooter."}')
id=$(jq -r .id <<<"$game")
etag=$(grep -i '^etag:' "$headers" | cut -d' ' -f2 | tr -d '\r')
echo "created $(jq -r .name <<<"$game") (version $(jq -r .version <<<"$game"), ETag $etag)"

# Merge patch with If-Match: applied only if the game is still at that version.
status=$(curl -s -o "$headers.body" -w '%{http_code}' -X PATCH "$url/v1/games/$id" -H "$auth" \
    -H 'Content-Type: application/merge-patch+json' -H "If-Match: $etag" -d '{"description":"A vector tube shooter."}')
echo "update with If-Match $etag: $status (version $(jq -r .version "$headers.body"))"

# The same ETag again is now stale: 412, and the problem says why.
status=$(curl -s -o "$headers.body" -w '%{http_code}' -X PATCH "$url/v1/games/$id" -H "$auth" \
    -H 'Content-Type: application/merge-patch+json' -H "If-Match: $etag" -d '{"description":"Lost update"}')
echo "update with stale If-Match $etag: $status $(jq -r .code "$headers.body")"
rm -f "$headers.body"

curl -sf -X DELETE "$url/v1/games/$id" -H "$auth" -H "If-Match: \"2\"" -o /dev/null
echo "deleted"
