#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 cluster (Debian's postgresql-15) in DIR, listening on
# 127.0.0.1:PORT and on a socket in DIR, with a login role `catalog` (password `catalog`,
# CREATEDB), and prints its URL. Stop it with: .ci/postgres.sh DIR stop
# initdb refuses to run as root, so the cluster belongs to the `postgres` user.
set -euo pipefail
dir=${1:-/tmp/catalog-postgres}
port=${2:-55432}
bin=/usr/lib/postgresql/15/bin
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ "${2:-}" = stop ]; then
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
    exit 0
fi
if [ -f "$dir/data/postmaster.pid" ]; then as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; fi
rm -rf "$dir"
mkdir -p "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
as_postgres "$bin/initdb" -D "$dir/data" -U postgres --locale=C.UTF-8 --lc-collate=C --encoding=UTF8 \
    --auth-local=trust --auth-host=scram-sha-256 >"$dir/initdb.log"
as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=1000 -c shared_buffers=128MB" >/dev/null
as_postgres "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres \
    -c "CREATE ROLE catalog LOGIN CREATEDB PASSWORD 'catalog'" -c "CREATE DATABASE catalog OWNER catalog"
echo "postgresql://catalog:catalog@127.0.0.1:$port/catalog"
