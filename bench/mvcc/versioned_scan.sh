#!/usr/bin/env bash
# The analog of the AnKerDB paper's Figure 9: full-scan time of an anker
# table against the fraction of rows updated after an old snapshot was
# taken, read from that old snapshot (so versioned rows are rebuilt from
# their undo chains). One run, all fractions, for the live columns (none)
# and for column snapshots (cow).
#
#   bench/mvcc/versioned_scan.sh [--rows N] [--runs R] [--out DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=10000000; RUNS=3; OUT=
while [ $# -gt 0 ]; do
    case $1 in
        --rows) ROWS=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "usage: $0 [--rows N] [--runs R] [--out DIR]" >&2; exit 2 ;;
    esac
done
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '12GB'" "max_parallel_workers_per_gather = 0" \
    "jit = off" "synchronous_commit = off" "autovacuum = off" "lc_messages = 'C'"
cluster_psql -q -c "CREATE EXTENSION anker" -c "CREATE EXTENSION dblink"
conn="dbname=postgres host=$CLUSTER_SOCK port=$CLUSTER_PORT"
echo "fraction,method,ms" > "$(cluster_workdir)/fig9.csv"
for pct in 0 1 10 50 100; do
    cluster_psql -q -c "DROP TABLE IF EXISTS t" \
        -c "CREATE TABLE t (id int8, v int8, w float8) USING anker" \
        -c "INSERT INTO t SELECT g, g, g FROM generate_series(1, $ROWS) g" -c "VACUUM t"
    # the old snapshot: a REPEATABLE READ transaction in another session
    cluster_psql -q -o /dev/null <<SQL
SELECT dblink_connect('old', '$conn');
SELECT dblink_exec('old', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT * FROM dblink('old', 'SELECT count(*) FROM t WHERE id = 1') AS x(n int8);
UPDATE t SET v = v + 1 WHERE id % 100 < $pct;
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS fig9 (fraction int, method text, ms float8);
SELECT dblink_exec('old', 'CREATE TEMP TABLE ms (method text, ms float8)');
SELECT dblink_exec('old', \$d\$
  DO \$\$ DECLARE t0 timestamptz; s int8; m text;
  BEGIN
    FOREACH m IN ARRAY ARRAY['none', 'cow'] LOOP
      EXECUTE format('SET anker.snapshot_method = %s', m);
      FOR i IN 1..$RUNS LOOP
        t0 := clock_timestamp();
        SELECT sum(v) INTO s FROM t;
        INSERT INTO ms VALUES (m, extract(epoch FROM clock_timestamp() - t0) * 1000);
        IF s <> ($ROWS::numeric * ($ROWS + 1) / 2) THEN RAISE EXCEPTION 'old snapshot read % ', s; END IF;
      END LOOP;
    END LOOP;
  END \$\$ \$d\$);
INSERT INTO fig9 SELECT $pct, method, min(ms) FROM dblink('old', 'SELECT method, ms FROM ms') AS x(method text, ms float8) GROUP BY method;
SELECT dblink_exec('old', 'COMMIT');
SELECT dblink_disconnect('old');
SQL
    cluster_psql -At -F, -c "SELECT fraction, method, round(ms::numeric, 1) FROM fig9 WHERE fraction = $pct ORDER BY method" | tee -a "$(cluster_workdir)/fig9.csv"
done
echo
echo "| versioned rows | none (live columns + chains), ms | cow (snapshot + chains), ms | none vs 0% |"
echo "|---:|---:|---:|---:|"
cluster_psql -At -F ' | ' -c "
  SELECT f.fraction || '%', round(n.ms::numeric, 1), round(c.ms::numeric, 1),
         round((n.ms / (SELECT ms FROM fig9 WHERE fraction = 0 AND method = 'none'))::numeric, 2)
    FROM (SELECT DISTINCT fraction FROM fig9) f
    JOIN fig9 n ON n.fraction = f.fraction AND n.method = 'none'
    JOIN fig9 c ON c.fraction = f.fraction AND c.method = 'cow'
   ORDER BY f.fraction" | sed 's/^/| /; s/$/ |/'
if [ -n "$OUT" ]; then mkdir -p "$OUT"; cp "$(cluster_workdir)/fig9.csv" "$OUT/"; fi
