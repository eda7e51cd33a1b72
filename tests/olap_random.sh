#!/usr/bin/env bash
# Seeded random analytical queries (tests/olap_random.py: joins, filters, group-by,
# aggregates, sub-queries, NULLs, every type anker hands to DuckDB) run on anker tables with
# anker.olap_engine = duckdb and on identical heap tables with PostgreSQL; every query must
# return the same rows (sorted, or in order under ORDER BY of all columns) or fail with the
# same SQLSTATE. Reports how many DuckDB ran.
#
#   tests/olap_random.sh [SEED] [COUNT]     (default: a seed from the date, 300 queries)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SEED=${1:-$(date +%Y%m%d)}
COUNT=${2:-300}
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "lc_messages = 'C'" "max_parallel_workers_per_gather = 0" \
    "anker.snapshot_min_rows = 1000" "anker.olap_min_scan_fraction = 0" >/dev/null
work=$(cluster_workdir)
cluster_psql -q -c "CREATE EXTENSION anker"
for am in anker heap; do
    s=$([ $am = anker ] && echo _a || echo _h)
    cluster_psql -q >/dev/null <<SQL
CREATE TABLE r1$s (k int, i2 int2, i4 int, i8 bigint, n numeric(10,2), f float8, b bool, d date, ts timestamp,
                   t text, c char(3)) USING $am;
CREATE TABLE r2$s (LIKE r1$s) USING $am;
SQL
done
# Identical rows in both: generated once into the heap tables, copied to anker's.
cluster_psql -q >/dev/null <<SQL
SELECT setseed(0.5);
INSERT INTO r1_h SELECT
    CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 20)::int END,
    CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 30 - 5)::int2 END,
    CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 1000 - 300)::int END,
    CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 1e12)::bigint END,
    CASE WHEN random() < 0.05 THEN NULL ELSE round((random() * 200 - 100)::numeric, 2) END,
    CASE WHEN random() < 0.05 THEN NULL ELSE round((random() * 64)::numeric, 1)::float8 / 8 END,
    CASE WHEN random() < 0.05 THEN NULL ELSE random() < 0.5 END,
    CASE WHEN random() < 0.05 THEN NULL ELSE date '2021-01-01' + (random() * 364)::int END,
    CASE WHEN random() < 0.05 THEN NULL ELSE timestamp '2021-01-01' + random() * interval '365 days' END,
    CASE WHEN random() < 0.05 THEN NULL ELSE 't' || (random() * 30)::int END,
    CASE WHEN random() < 0.05 THEN NULL ELSE (ARRAY['a', 'ab', 'b', 'xyz'])[1 + (random() * 3)::int] END
FROM generate_series(1, 20000);
INSERT INTO r2_h SELECT * FROM r1_h LIMIT 60;
INSERT INTO r1_a SELECT * FROM r1_h;
INSERT INTO r2_a SELECT * FROM r2_h;
ANALYZE;
SQL
python3 "$ROOT/tests/olap_random.py" "$SEED" "$COUNT" > "$work/queries"
# One session per engine; each query's output between markers; errors as SQLSTATEs.
run() { # suffix engine
    { echo "SET anker.olap_engine = $2;"; echo "SET anker.olap_min_cost = 0;"; echo '\set VERBOSITY sqlstate'
      n=0; while IFS= read -r q; do n=$((n + 1)); echo "\\echo ==Q$n=="; echo "${q//@/$1};"; done < "$work/queries"; } \
        | cluster_psql -X -At -P null='(null)' -v ON_ERROR_STOP=0 2>&1
}
run _a duckdb > "$work/anker.out"
run _h postgres > "$work/heap.out"
{ echo "SET anker.olap_engine = duckdb;"; echo "SET anker.olap_min_cost = 0;"; while IFS= read -r q; do echo "\\echo ==Q=="; echo "EXPLAIN (COSTS OFF) ${q//@/_a};"; done < "$work/queries"; } \
    | cluster_psql -X -At 2>&1 > "$work/explain.out"
taken=$(grep -c 'AnkerDuckDB' "$work/explain.out" || true)
python3 - "$work/anker.out" "$work/heap.out" "$work/queries" <<'PY'
import re, sys
def split(path):
    parts = {}
    cur = None
    for line in open(path).read().splitlines():
        m = re.match(r"^==Q(\d+)==$", line)
        if m:
            cur = int(m.group(1)); parts[cur] = []
        elif cur is not None:
            parts[cur].append(line)
    return parts
a, h = split(sys.argv[1]), split(sys.argv[2])
queries = open(sys.argv[3]).read().splitlines()
bad = 0
for i, q in enumerate(queries, 1):
    ra, rh = a.get(i, []), h.get(i, [])
    if "ORDER BY" not in q:
        ra, rh = sorted(ra), sorted(rh)
    if ra != rh:
        bad += 1
        if bad <= 5:
            first = next(j for j in range(max(len(ra), len(rh))) if ra[j:j + 1] != rh[j:j + 1])
            print(f"DIFFERENT Q{i}: {q}\n  {len(ra)} rows on anker, {len(rh)} on heap; first difference at row {first + 1}:"
                  f"\n  anker: {ra[first:first + 3]}\n  heap:  {rh[first:first + 3]}")
print(f"{len(queries) - bad} same, {bad} different")
sys.exit(1 if bad else 0)
PY
echo "seed $SEED: $COUNT queries, $taken run by DuckDB"
echo "ok: random analytical queries return heap's rows with anker.olap_engine = duckdb"
