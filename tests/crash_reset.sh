#!/usr/bin/env bash
# After a backend crash the postmaster reinitialises shared memory; anker
# resets its arena there instead of reusing possibly torn contents, and
# crash recovery brings the tables back from their change logs and the WAL
# (docs/durability.md): every committed row is back, the transaction the
# crash cut off is not, memory use is what the table needs, and the server
# keeps working.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '512MB'" \
    "restart_after_crash = on" "lc_messages = 'C'"
cluster_psql -c "CREATE EXTENSION anker"
cluster_psql -c "CREATE TABLE t (a int, b text) USING anker" \
             -c "INSERT INTO t SELECT g, repeat('x', 50) FROM generate_series(1, 200000) g"
cluster_psql -Atc "SELECT count(*) FROM t" | grep -qx 200000
before=$(cluster_psql -Atc "SELECT bytes FROM anker.tables WHERE relation = 't'::regclass")
# crash a backend while it holds a transaction with uncommitted rows
cluster_psql -c "BEGIN" -c "INSERT INTO t SELECT g, 'uncommitted' FROM generate_series(1, 1000) g" \
             -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
sleep 2
pid=$(cluster_psql -Atc "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND pid <> pg_backend_pid()")
kill -9 "$pid"
wait || true
for _ in $(seq 1 60); do
    cluster_psql -Atc "SELECT 1" >/dev/null 2>&1 && break
    sleep 1
done
grep -q "all server processes terminated; reinitializing" <<< "$(cluster_log_tail 30)"
n=$(cluster_psql -Atc "SELECT count(*) FROM t")
uncommitted=$(cluster_psql -Atc "SELECT count(*) FROM t WHERE b = 'uncommitted'")
after=$(cluster_psql -Atc "SELECT bytes FROM anker.tables WHERE relation = 't'::regclass")
echo "rows after crash: $n (uncommitted: $uncommitted); table bytes $after (before the crash: $before)"
[ "$n" = 200000 ]
[ "$uncommitted" = 0 ]
# the reloaded table holds about what it held (the aborted rows' slots too)
[ "$after" -le $((before * 3 / 2 + 4 * 1024 * 1024)) ]
cluster_psql -c "INSERT INTO t VALUES (1, 'after')"
cluster_psql -Atc "SELECT count(*) FROM t" | grep -qx 200001
echo "ok: arena reset after crash-restart, tables recovered"
