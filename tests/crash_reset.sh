#!/usr/bin/env bash
# After a backend crash the postmaster reinitialises shared memory; anker
# resets its arena there instead of reusing possibly torn contents: tables
# come back empty, memory use returns to the fresh-start baseline, and the
# server keeps working. (anker tables are in-memory until WAL support lands.)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '512MB'" \
    "restart_after_crash = on" "lc_messages = 'C'"
cluster_psql -c "CREATE EXTENSION anker"
base=$(cluster_psql -Atc "SELECT used_bytes FROM anker.memory")
cluster_psql -c "CREATE TABLE t (a int, b text) USING anker" \
             -c "INSERT INTO t SELECT g, repeat('x', 50) FROM generate_series(1, 200000) g"
cluster_psql -Atc "SELECT count(*) FROM t" | grep -qx 200000
# crash a backend while it holds a transaction
cluster_psql -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
sleep 1
pid=$(cluster_psql -Atc "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND pid <> pg_backend_pid()")
kill -9 "$pid"
wait || true
for _ in $(seq 1 60); do
    cluster_psql -Atc "SELECT 1" >/dev/null 2>&1 && break
    sleep 1
done
cluster_log_tail 30 | grep -q "all server processes terminated; reinitializing"
n=$(cluster_psql -Atc "SELECT count(*) FROM t")
used=$(cluster_psql -Atc "SELECT used_bytes FROM anker.memory")
echo "rows after crash: $n; arena bytes in use: $used (fresh start: $base)"
[ "$n" = 0 ]
[ "$used" -le $((base + 4 * 1024 * 1024)) ]
cluster_psql -c "INSERT INTO t VALUES (1, 'after')"
cluster_psql -Atc "SELECT count(*) FROM t" | grep -qx 1
echo "ok: arena reset after crash-restart"
