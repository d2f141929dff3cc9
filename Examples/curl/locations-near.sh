#!/usr/bin/env bash
# Locations within a radius of a point, nearest first, with their distance.
# Usage: CATALOG_URL=http://127.0.0.1:8080 ./locations-near.sh LAT LON RADIUS_METERS
set -euo pipefail
url=${CATALOG_URL:-http://127.0.0.1:8080}
curl -sfG "$url/v1/locations" --data-urlencode "near=${1:?latitude},${2:?longitude}" --data-urlencode "radius=${3:?meters}" \
    | jq -r '.items[] | "\(.name) \(.distanceMeters / 1000 | round) km"'
