#!/usr/bin/env bash
# A backend that ends mid-transaction (pg_terminate_backend, or a client
# that disconnects) leaves no visible trace of its in-place updates: its
# abort puts the before-images back, and others can update the rows.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '512MB'" "lc_messages = 'C'"
cluster_psql -c "CREATE EXTENSION anker" \
             -c "CREATE TABLE t (id int PRIMARY KEY, v int, note text) USING anker" \
             -c "INSERT INTO t SELECT g, g, 'original' FROM generate_series(1, 1000) g"
undone() { cluster_psql -Atc "SELECT value FROM anker.stats WHERE name = 'undone_updates'"; }
before=$(undone)

# 1. terminated while holding uncommitted in-place updates
cluster_psql -c "BEGIN" -c "UPDATE t SET v = -v, note = 'uncommitted and long enough for a blob' WHERE id <= 100" \
             -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
for _ in $(seq 1 50); do
    pid=$(cluster_psql -Atc "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND pid <> pg_backend_pid()")
    [ -n "$pid" ] && break
    sleep 0.2
done
cluster_psql -Atc "SELECT pg_terminate_backend($pid)" | grep -qx t
wait || true

# 2. a client that disconnects in the middle of a transaction
cluster_run bash -c "printf 'BEGIN;\nUPDATE t SET v = 0 WHERE id > 900;\n' | '$PG_BINDIR/psql' -X -q"

sleep 0.5
bad=$(cluster_psql -Atc "SELECT count(*) FROM t WHERE v <> id OR note <> 'original'")
after=$(undone)
echo "rows showing aborted changes: $bad; in-place updates undone: $((after - before))"
[ "$bad" = 0 ]
[ "$((after - before))" -ge 200 ]
cluster_psql -c "UPDATE t SET v = v + 1 WHERE id <= 100"
cluster_psql -Atc "SELECT sum(v) FROM t WHERE id <= 100" | grep -qx 5150
echo "ok: no trace of terminated or disconnected transactions"
