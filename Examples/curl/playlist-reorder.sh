#!/usr/bin/env bash
# Builds a playlist from the first videos of the catalog, reorders it with If-Match on
# the playlist (every entry change answers with the playlist's new ETag), shows the 412
# a stale ETag gets, asks what plays next, and prints the order with one request
# (include=entries).
# Usage: CATALOG_URL=http://127.0.0.1:8080 CATALOG_API_KEY=catalog_... ./playlist-reorder.sh [ITEMS]   (default 3)
set -euo pipefail
url=${CATALOG_URL:-http://127.0.0.1:8080}
# Writes need an API key: catalog-server keys create (the first admin), catalog keys create or POST /v1/api-keys.
[ -n "${CATALOG_API_KEY:-}" ] || { echo "${0##*/}: set CATALOG_API_KEY to an API key; writes need one" >&2; exit 1; }
auth="Authorization: Bearer $CATALOG_API_KEY"
count=${1:-3}
headers=$(mktemp)
trap 'rm -f "$headers"' EXIT
etag() { grep -i '^etag:' "$headers" | cut -d' ' -f2 | tr -d '\r'; }

# A new, empty playlist.
playlist=$(curl -sf -X POST "$url/v1/playlists" -H "$auth" -H 'Content-Type: application/json' \
    -d '{"title":"Movie night","description":"Built by playlist-reorder.sh"}' | jq -r .id)

# Append the first videos in title order; each answer carries the playlist's new ETag.
for item in $(curl -sf "$url/v1/playable-items?limit=$count&sort=title" | jq -r '.items[].id'); do
    curl -sf -D "$headers" -X POST "$url/v1/playlists/$playlist/entries" -H "$auth" -H 'Content-Type: application/json' \
        -d "{\"playableItemId\":\"$item\"}" | jq -r '"added \(.playableItem.title) at \(.position)"'
done
tag=$(etag)

# Move the last entry to the front, only if nobody changed the playlist meanwhile.
last=$(curl -sf "$url/v1/playlists/$playlist/entries?limit=100" | jq -r '.items[-1].entryId')
curl -sf -D "$headers" -X PATCH "$url/v1/playlists/$playlist/entries/$last" -H "$auth" \
    -H 'Content-Type: application/merge-patch+json' -H "If-Match: $tag" -d '{"position":0}' \
    | jq -r --arg tag "$tag" '"moved \(.playableItem.title) to \(.position) with If-Match \($tag)"'
echo "the playlist is now at ETag $(etag)"

# Another app still holding the old ETag loses: 412, nothing changes.
status=$(curl -s -o "$headers.body" -w '%{http_code}' -X PATCH "$url/v1/playlists/$playlist/entries/$last" -H "$auth" \
    -H 'Content-Type: application/merge-patch+json' -H "If-Match: $tag" -d '{"position":1}')
echo "a move with the stale If-Match $tag: $status $(jq -r .code "$headers.body")"
rm -f "$headers.body"

# What plays after the first entry? (404 endOfPlaylist after the last.)
curl -sf "$url/v1/playlists/$playlist/entries/$last/next" | jq -r '"up next after the first: \(.playableItem.title)"'

# The whole screen in one request: the playlist with its entries.
curl -sf "$url/v1/playlists/$playlist?include=entries" \
    | jq -r '"\(.title), \(.entryCount) entries, version \(.version):", (.entries.items[] | "  \(.position). \(.playableItem.title)")'

curl -sf -X DELETE "$url/v1/playlists/$playlist" -H "$auth" -o /dev/null
echo "deleted the playlist"
