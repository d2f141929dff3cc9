#!/usr/bin/env bash
# Posts a comment on a video and a reply to it, lists the thread (newest first, then the
# replies oldest first), shows that a reply to a reply is refused (422), and deletes the
# comment: with a reply under it, it stays as a tombstone. The author is the key's user:
# comments show its display name.
# Usage: CATALOG_URL=http://127.0.0.1:8080 CATALOG_API_KEY=catalog_... ./comments.sh ["VIDEO TITLE SEARCH"]   (default "tears of steel")
set -euo pipefail
url=${CATALOG_URL:-http://127.0.0.1:8080}
# Writes need an API key: catalog-server keys create (the first admin), catalog keys create or POST /v1/api-keys.
[ -n "${CATALOG_API_KEY:-}" ] || { echo "${0##*/}: set CATALOG_API_KEY to an API key; writes need one" >&2; exit 1; }
auth="Authorization: Bearer $CATALOG_API_KEY"
search=${1:-tears of steel}
item=$(curl -sf -G "$url/v1/playable-items" --data-urlencode "q=$search" --data-urlencode limit=1 | jq -r '.items[0].id')
echo "commenting on $(curl -sf "$url/v1/playable-items/$item?fields=title" | jq -r .title)"

# A top-level comment, then a reply to it (parentId).
comment=$(curl -sf -X POST "$url/v1/playable-items/$item/comments" -H "$auth" -H 'Content-Type: application/json' \
    -d '{"body":"The visual effects still hold up."}' | jq -r .id)
reply=$(curl -sf -X POST "$url/v1/playable-items/$item/comments" -H "$auth" -H 'Content-Type: application/json' \
    -d "{\"body\":\"Especially the robots.\",\"parentId\":\"$comment\"}" | jq -r .id)

# The thread: top-level comments newest first, each with its reply count; then the replies.
curl -sf "$url/v1/playable-items/$item/comments" | jq -r '.items[] | "\(.author): \(.body) (\(.replyCount) replies)"'
curl -sf "$url/v1/comments/$comment/replies" | jq -r '.items[] | "  reply by \(.author): \(.body)"'

# One level of replies only: a reply to a reply is a 422 naming /parentId.
curl -s -X POST "$url/v1/playable-items/$item/comments" -H "$auth" -H 'Content-Type: application/json' \
    -d "{\"body\":\"Me too\",\"parentId\":\"$reply\"}" \
    | jq -r '"reply to a reply: \(.status) \(.errors[0].pointer) \(.errors[0].code)"'

# Deleting a comment that has replies keeps it as a tombstone, without its body.
curl -sf -X DELETE "$url/v1/comments/$comment" -H "$auth" -o /dev/null
curl -sf "$url/v1/comments/$comment" | jq -r '"after delete: deleted=\(.deleted), body=\(.body // "(none)"), replies=\(.replyCount)"'
# Its last reply gone, the tombstone goes too.
curl -sf -X DELETE "$url/v1/comments/$reply" -H "$auth" -o /dev/null
echo "after deleting the reply: $(curl -s -o /dev/null -w '%{http_code}' "$url/v1/comments/$comment")"
