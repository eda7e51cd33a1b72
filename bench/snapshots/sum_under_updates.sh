#!/usr/bin/env bash
# Latency of SELECT sum(col) over an anker table while a concurrent stream
# of single-row updates runs, for each snapshot provider (none: live
# columns and version chains; cow; memcpy), all in one run.
#
#   bench/snapshots/sum_under_updates.sh [--rows N] [--runs R] [--out DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=10000000; RUNS=7; OUT=
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
    "jit = off" "synchronous_commit = off" "lc_messages = 'C'"
cluster_psql -q -c "CREATE EXTENSION anker" \
    -c "CREATE TABLE t (id int PRIMARY KEY, v int8, w int8, pad text) USING anker" \
    -c "INSERT INTO t SELECT g, g, g, 'padding ' || g FROM generate_series(1, $ROWS) g" -c "VACUUM ANALYZE t"
work=$(cluster_workdir)
printf '\\set id random(1, %s)\nUPDATE t SET v = v + 1, w = w - 1 WHERE id = :id;\n' "$ROWS" > "$work/upd.sql"
chown postgres "$work/upd.sql"
cluster_psql -q -c "CREATE TABLE lat (method text, run int, ms float8, cow_copies int8, tps float8)"
for method in none cow memcpy; do
    # one update stream (a client) for the whole measurement
    cluster_pgbench -n -M prepared -c 1 -j 1 -T 3600 -f "$work/upd.sql" postgres >"$work/pgbench.$method" 2>&1 &
    writer=$!
    sleep 2
    cluster_psql -q -o /dev/null <<SQL
SET anker.snapshot_method = $method;
DO \$\$ DECLARE t0 timestamptz; s numeric; c0 int8;
BEGIN
  FOR i IN 1..$RUNS LOOP
    c0 := (SELECT value FROM anker.stats WHERE name = 'cow_page_copies');
    t0 := clock_timestamp();
    SELECT sum(v + w) INTO s FROM t;
    INSERT INTO lat VALUES ('$method', i, extract(epoch FROM clock_timestamp() - t0) * 1000,
                            (SELECT value FROM anker.stats WHERE name = 'cow_page_copies') - c0, NULL);
    IF s <> 2 * ($ROWS::numeric * ($ROWS + 1) / 2) THEN RAISE EXCEPTION 'inconsistent sum %', s; END IF;
  END LOOP;
END \$\$;
SQL
    # stop the update stream (pgbench runs as the cluster owner, under runuser)
    pkill -INT -f "pgbench.*$work/upd.sql" 2>/dev/null || true
    wait "$writer" 2>/dev/null || true
    echo "$method done"
done
echo
echo "| provider | median ms | min ms | max ms | pages copied per query (median) |"
echo "|---|---:|---:|---:|---:|"
cluster_psql -At -F ' | ' -c "
  SELECT method, round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 1),
         round(min(ms)::numeric, 1), round(max(ms)::numeric, 1),
         percentile_disc(0.5) WITHIN GROUP (ORDER BY cow_copies)
    FROM lat GROUP BY method ORDER BY array_position(ARRAY['none','cow','memcpy'], method)" | sed 's/^/| /; s/$/ |/'
if [ -n "$OUT" ]; then
    mkdir -p "$OUT"
    cluster_psql -c "COPY lat TO STDOUT WITH (FORMAT csv, HEADER)" > "$OUT/sum_latency.csv"
fi
