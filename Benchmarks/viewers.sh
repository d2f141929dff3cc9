#!/usr/bin/env bash
# Each viewer's state under load, on both engines in one run: SQLite (a file) and PostgreSQL
# 15 (a throwaway cluster, .ci/postgres.sh), each holding the same items and 10,000 viewers
# (users with API keys, written straight into the databases).
#   1. The 10,000 viewers each send a heartbeat every 10 s (PUT /v1/me/progress/{id}): 1,000
#      durable writes/s from 50 connections paced by wrk's delay() (fewer than the 64 places
#      one client address holds in the database pool's queue on PostgreSQL: all of them come
#      from this one address, where real viewers come from thousands), while 8 other
#      connections read items, up to 4,000 a second (each paced to 500/s: readers that
#      read as fast as they can would only measure a saturated CPU, PostgreSQL sharing
#      this machine's two cores). Targets: GET p99 ≤ 25 ms, heartbeat p99 ≤ 50 ms, no non-2xx.
#   2. GET /v1/me/continue-watching for a viewer with 5,000 progress rows (a first page):
#      p99 ≤ 10 ms.
#   3. One item watched by 1,000 viewers at once: 1,000 view reports (POST …/views, 50 at a
#      time), then its viewCount read until it is exactly 1,000 (the server adds views up
#      every 2 s, in one batch); beside the same 1,000 viewers' heartbeats sent the same way,
#      so the writes the reports cost and the batch's one update can be set against 1,000
#      independent heartbeats.
# Usage: Benchmarks/viewers.sh   (env: BENCH_DURATION=10s BENCH_WORKERS=1 BENCH_ITEMS=5000;
#        CATALOG_SERVER=path/to/catalog-server measures that build instead)
set -euo pipefail
cd "$(dirname "$0")/.."
. Benchmarks/lib.sh
bench_require sqlite3
bench_server
items=${BENCH_ITEMS:-5000}
viewers=10000

work=$(mktemp -d)
chmod 755 "$work"
sqlite_port=18580 postgres_port=18581 cluster_port=55580
sqlite_pid= postgres_pid=
trap '[ -n "$sqlite_pid" ] && kill $sqlite_pid 2>/dev/null; [ -n "$postgres_pid" ] && kill $postgres_pid 2>/dev/null; bash .ci/postgres.sh "$work/cluster" stop; rm -rf "$work"' EXIT

# The same items and viewers in both databases.
bench_both_engines "$work" "$items" "$cluster_port"
sqlite3 "$work/catalog.sqlite" "SELECT id FROM playable_items ORDER BY created_at" > "$work/ids.txt"
python3 - "$work" "$viewers" <<'PY'
import base64, hashlib, os, sqlite3, sys, uuid
work, count = sys.argv[1], int(sys.argv[2])
rows = []
with open(f"{work}/users.csv", "w") as users, open(f"{work}/keys.csv", "w") as keys, open(f"{work}/secrets.txt", "w") as secrets:
    for i in range(count):
        user, key = str(uuid.uuid4()), str(uuid.uuid4())
        secret = "catalog_" + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        digest = hashlib.sha256(secret.encode()).digest()
        users.write(f"{user},Viewer {i},member,1763000000000,1763000000000,1\n")
        keys.write(f"{key},{user},bench,member,{secret[:16]},{digest.hex()},1763000000000,1763000000000,1\n")
        secrets.write(f"{secret} {user}\n")
        rows.append((user, key, secret[:16], digest))
database = sqlite3.connect(f"{work}/catalog.sqlite")
with database:
    database.executemany("INSERT INTO users (id, display_name, role, created_at, updated_at, version) VALUES (?, 'Viewer', 'member', 1763000000000, 1763000000000, 1)",
                         [(user,) for user, _, _, _ in rows])
    database.executemany("INSERT INTO api_keys (id, user_id, name, role, prefix, secret_hash, created_at, updated_at, version) "
                         "VALUES (?, ?, 'bench', 'member', ?, ?, 1763000000000, 1763000000000, 1)", [(key, user, prefix, digest) for user, key, prefix, digest in rows])
database.close()
PY
psql -q "$url" -c "\\copy users (id, display_name, role, created_at, updated_at, version) FROM '$work/users.csv' CSV"
psql -q "$url" -c "CREATE TEMP TABLE k (id text, user_id text, name text, role text, prefix text, hash text, created_at bigint, updated_at bigint, version bigint)" \
    -c "\\copy k FROM '$work/keys.csv' CSV" \
    -c "INSERT INTO api_keys (id, user_id, name, role, prefix, secret_hash, created_at, updated_at, version) SELECT id, user_id, name, role, prefix, decode(hash, 'hex'), created_at, updated_at, version FROM k"
# The first viewer has begun 5,000 items (for continue-watching).
first_user=$(head -1 "$work/secrets.txt" | cut -d' ' -f2)
first_key=$(head -1 "$work/secrets.txt" | cut -d' ' -f1)
progress_sql="INSERT INTO viewer_progress (user_id, item_id, position_seconds, duration_seconds, played, play_count, watched_at, device_id, begun, version)
    SELECT '$first_user', id, 100, 600, 0, 0, created_at, 'bench', 1, 1 FROM playable_items ORDER BY created_at LIMIT 5000"
sqlite3 "$work/catalog.sqlite" "$progress_sql"
psql -q "$url" -c "$progress_sql" -c "VACUUM ANALYZE"

"$server" --port "$sqlite_port" --loop-threads "$BENCH_WORKERS" --database "$work/catalog.sqlite" --no-seed --log-level warning --rate-limits off >/dev/null &
sqlite_pid=$!
"$server" --port "$postgres_port" --loop-threads "$BENCH_WORKERS" --database "$url" --no-seed --log-level warning --rate-limits off >/dev/null &
postgres_pid=$!
bench_wait_port "$sqlite_port"
bench_wait_port "$postgres_port"

# wrk scripts: heartbeats (each request the next viewer, on its own item, every connection
# paced to 20 requests/s), item reads, and continue-watching.
{
    echo "keys = {"; cut -d' ' -f1 "$work/secrets.txt" | sed 's/.*/"&",/'; echo "}"
    echo "ids = {"; head -n "$viewers" "$work/ids.txt" | sed 's/.*/"&",/'; echo "}"
    cat <<'LUA'
counter = 0
request = function()
    counter = counter + 1
    local viewer = (counter * 7919) % #keys + 1
    local body = string.format('{"positionSeconds":%d,"clientTime":"%s","deviceId":"phone"}', counter % 600, os.date("!%Y-%m-%dT%H:%M:%S.000Z"))
    return wrk.format("PUT", "/v1/me/progress/" .. ids[(viewer % #ids) + 1],
        { ["Authorization"] = "Bearer " .. keys[viewer], ["Content-Type"] = "application/json" }, body)
end
delay = function() return 50 end
-- What a refused heartbeat was refused with, on stderr (at most ten).
refused = 0
response = function(status, headers, body)
    if status ~= 200 and refused < 10 then
        refused = refused + 1
        io.stderr:write("    refused: " .. status .. " " .. body .. "\n")
    end
end
LUA
} > "$work/heartbeats.lua"
{
    echo "ids = {"; sed 's/.*/"&",/' "$work/ids.txt"; echo "}"
    echo 'request = function() return wrk.format("GET", "/v1/playable-items/" .. ids[math.random(#ids)]) end'
    echo 'delay = function() return 2 end'
} > "$work/get.lua"
echo "wrk.headers[\"Authorization\"] = \"Bearer $first_key\"" > "$work/continue.lua"

echo "database: $items playable items, $viewers viewers; loop threads: $BENCH_WORKERS each; $BENCH_DURATION a run"
for engine in sqlite postgres; do
    port_var=${engine}_port pid_var=${engine}_pid
    port=${!port_var} pid=${!pid_var}
    base="http://127.0.0.1:$port"
    echo "$engine"
    echo "  1. heartbeats, 1,000/s from 50 connections (p99 ≤ 50 ms), with 8 connections reading items, up to 4,000/s (p99 ≤ 25 ms):"
    BENCH_CONNECTIONS=50 BENCH_DURATION=3s bench_wrk "    (warm-up)" "$base" "$work/heartbeats.lua" >/dev/null
    BENCH_CONNECTIONS=8 bench_wrk "    GET items" "$base" "$work/get.lua" > "$work/reads.out" &
    reads=$!
    BENCH_CONNECTIONS=50 bench_wrk "    PUT heartbeats" "$base" "$work/heartbeats.lua"
    wait $reads
    cat "$work/reads.out"
    echo "  2. continue-watching of 5,000 begun items, first page (p99 ≤ 10 ms):"
    BENCH_CONNECTIONS=8 BENCH_DURATION=3s bench_wrk "    (warm-up)" "$base/v1/me/continue-watching" "$work/continue.lua" >/dev/null
    BENCH_CONNECTIONS=8 bench_wrk "    GET continue-watching" "$base/v1/me/continue-watching" "$work/continue.lua" "$pid"
    echo "  3. one item watched by 1,000 viewers at once:"
    item=$(sed -n 4999p "$work/ids.txt")
    python3 - "$base" "$item" "$work/secrets.txt" <<'PY'
import concurrent.futures, http.client, json, sys, time
base, item, secrets = sys.argv[1], sys.argv[2], [line.split()[0] for line in open(sys.argv[3])][1:1001]
host, port = base.replace("http://", "").split(":")
def send(method, path, key, body):
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request(method, path, json.dumps(body), {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    return response.status, answer
def burst(method, path, body):
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        results = list(pool.map(lambda key: send(method, path, key, body), secrets))
    return time.monotonic() - start, results
def view_count():
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", f"/v1/playable-items/{item}")
    count = json.loads(connection.getresponse().read())["viewCount"]
    connection.close()
    return count
heartbeats, results = burst("PUT", f"/v1/me/progress/{item}", {"positionSeconds": 40, "clientTime": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()), "deviceId": "tv"})
bad = sum(1 for status, _ in results if status != 200)
print(f"    1,000 heartbeats, 50 at a time: {heartbeats * 1000:.0f} ms ({bad} not 200)")
views, results = burst("POST", f"/v1/playable-items/{item}/views", {"sessionId": "bench", "positionSeconds": 40})
counted = sum(1 for status, answer in results if status == 200 and json.loads(answer)["counted"])
sent = time.monotonic()
count = view_count()
while count < 1000 and time.monotonic() - sent < 15:
    time.sleep(0.05)
    count = view_count()
print(f"    1,000 view reports, 50 at a time: {views * 1000:.0f} ms, {counted} counted; viewCount {count} (exact: {count == counted == 1000}) "
      f"{(time.monotonic() - sent) * 1000:.0f} ms after the last report")
PY
done
echo "peak RSS: SQLite-backed $(bench_rss "$sqlite_pid"), PostgreSQL-backed $(bench_rss "$postgres_pid")"
