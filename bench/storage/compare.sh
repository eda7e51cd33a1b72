#!/usr/bin/env bash
# Load the same rows of (int8, float8, numeric(12,2), text) into an anker
# table and a heap table, run a few analytical queries on both, and report
# times and memory as ratios from this one run.
#
#   bench/storage/compare.sh [--rows N] [--runs R] [--out DIR]
#
# Needs the extension installed (scripts/setup.sh). Prints a Markdown table;
# writes results.csv into --out (default: a temp dir that is removed).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=1000000
RUNS=3
OUT=
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
# heap gets shared_buffers that hold its table, so both run from memory
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '16GB'" \
    "shared_buffers = '4GB'" "max_parallel_workers_per_gather = 0" "jit = off" \
    "synchronous_commit = off" "max_wal_size = '8GB'" "checkpoint_timeout = '1h'"
echo "cluster at $CLUSTER_DIR, $ROWS rows, best of $RUNS runs" >&2
work=$(cluster_workdir)
cluster_psql -q -o /dev/null <<SQL
CREATE EXTENSION anker;
-- one source file, loaded into both tables with COPY
COPY (SELECT g::int8, (g * 0.618033988749895) % 1000, ((g::int8 * 7919) % 100000) / 100.0,
             'customer ' || (g % 1000) || ' ' || md5(g::text)
        FROM generate_series(1, $ROWS) g) TO '$work/rows.copy';
CREATE TABLE t_heap (id int8, f float8, amount numeric(12,2), label text) USING heap;
CREATE TABLE t_anker (id int8, f float8, amount numeric(12,2), label text) USING anker;
CREATE TABLE results (engine text, what text, ms float8);
CREATE FUNCTION timed(engine text, what text, q text, runs int) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz; best float8 := 'Infinity';
BEGIN
  FOR i IN 1..runs LOOP
    t0 := clock_timestamp();
    EXECUTE q;
    best := least(best, extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
  INSERT INTO results VALUES (engine, what, best);
END \$\$;
SQL
for engine in heap anker; do
    cluster_psql -q -o /dev/null -c "SELECT timed('$engine', 'load (COPY)', \$q\$COPY t_$engine FROM '$work/rows.copy'\$q\$, 1)"
    cluster_psql -q -c "VACUUM ANALYZE t_$engine"
done
for engine in heap anker; do
    cluster_psql -q -o /dev/null <<SQL
SELECT timed('$engine', 'sum(f)', 'SELECT sum(f) FROM t_$engine', $RUNS);
SELECT timed('$engine', 'avg(amount) GROUP BY label', 'SELECT left(label, 12), avg(amount) FROM t_$engine GROUP BY 1', $RUNS);
SELECT timed('$engine', 'count(*)', 'SELECT count(*) FROM t_$engine', $RUNS);
SELECT timed('$engine', 'filtered avg', 'SELECT avg(f) FROM t_$engine WHERE id % 10 = 0', $RUNS);
SQL
done
cluster_psql -q <<'SQL'
INSERT INTO results
SELECT 'heap', 'bytes per row', pg_total_relation_size('t_heap')::float8 / (SELECT count(*) FROM t_heap)
UNION ALL
SELECT 'anker', 'bytes per row', bytes::float8 / (SELECT count(*) FROM t_anker) FROM anker.tables WHERE relation = 't_anker'::regclass;
SQL
# both tables must hold the same data
same=$(cluster_psql -Atc "SELECT (SELECT sum(hashtext(t::text)) FROM t_heap t) = (SELECT sum(hashtext(t::text)) FROM t_anker t)")
[ "$same" = t ] || { echo "heap and anker tables differ!" >&2; exit 1; }
echo
echo "| measure ($ROWS rows) | heap | anker | anker / heap |"
echo "|---|---:|---:|---:|"
cluster_psql -At -F ' | ' <<'SQL' | sed 's/^/| /; s/$/ |/'
SELECT h.what || CASE WHEN h.what LIKE 'bytes%' THEN '' ELSE ' (ms)' END,
       round(h.ms::numeric, 1), round(a.ms::numeric, 1), round((a.ms / h.ms)::numeric, 3)
  FROM results h JOIN results a ON a.what = h.what AND a.engine = 'anker'
 WHERE h.engine = 'heap' ORDER BY h.ctid;
SQL
if [ -n "$OUT" ]; then
    mkdir -p "$OUT"
    cluster_psql -Atc "COPY results TO STDOUT WITH (FORMAT csv, HEADER)" > "$OUT/results.csv"
fi
cluster_stop
