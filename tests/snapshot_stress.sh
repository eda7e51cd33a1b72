#!/usr/bin/env bash
# Consistency under load: pgbench moves money between accounts (the total
# never changes) while two readers keep summing all balances, on column
# snapshots (cow, memcpy) and on the live columns (none), in PostgreSQL's
# executor and in the embedded DuckDB (anker.olap_engine = duckdb, two
# threads). Every sum must be the constant. The readers create well over 1,000 snapshots while writers
# run; afterwards memory use returns to its baseline.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
SECONDS_PER_METHOD=${ANKER_STRESS_SECONDS:-6}
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '1GB'" "lc_messages = 'C'" \
    "max_parallel_workers_per_gather = 0"
cluster_psql -c "CREATE EXTENSION anker" \
    -c "CREATE TABLE acct (id int PRIMARY KEY, balance bigint, note text) USING anker" \
    -c "INSERT INTO acct SELECT g, 1000, 'account ' || g FROM generate_series(1, 20000) g" \
    -c "VACUUM acct"
total=$(cluster_psql -Atc "SELECT sum(balance) FROM acct")
base=$(cluster_psql -Atc "SELECT used_bytes FROM anker.memory")
created0=$(cluster_psql -Atc "SELECT value FROM anker.stats WHERE name = 'snapshots_created'")
work=$(cluster_workdir)
cp "$ROOT/tests/transfer.sql" "$ROOT/tests/transfer_reader.sql" "$work/"
chown postgres "$work/transfer.sql" "$work/transfer_reader.sql"
for engine in postgres duckdb; do
  cluster_psql -Atc "SET anker.olap_engine = $engine" -c "SET anker.olap_min_cost = 0" -c "EXPLAIN SELECT sum(balance) FROM acct" | grep -q "$([ $engine = duckdb ] && echo AnkerDuckDB || echo AnkerAgg)"
  for method in cow memcpy none; do
    cluster_pgbench -n -c 2 -j 2 -T "$SECONDS_PER_METHOD" -f "$work/transfer.sql" postgres >"$work/pgbench.$method" 2>&1 &
    writer=$!
    sleep 0.5
    # two readers: their snapshots are made and released concurrently
    for r in 1 2; do
        cluster_psql -At -v method="$method" -v engine="$engine" -v total="$total" \
            -v seconds=$((SECONDS_PER_METHOD - 1)) -f "$work/transfer_reader.sql" >"$work/reader$r" 2>&1 &
        readers[r]=$!
    done
    for r in 1 2; do
        wait "${readers[r]}" || { cat "$work/reader$r"; exit 1; }
    done
    out=$(cat "$work/reader1" "$work/reader2")
    wait "$writer"
    tps=$(grep -o 'tps = [0-9.]*' "$work/pgbench.$method" | head -n 1)
    echo "$engine, $method: $(echo "$out" | grep -o 'reads [0-9]*' | paste -sd+) consistent sums; writers: $tps"
  done
done
created=$(( $(cluster_psql -Atc "SELECT value FROM anker.stats WHERE name = 'snapshots_created'") - created0 ))
echo "column snapshots created while writers ran: $created"
[ "$created" -ge 1000 ]
[ "$(cluster_psql -Atc "SELECT count(*) FROM anker.snapshots")" = 0 ]
[ "$(cluster_psql -Atc "SELECT sum(balance) FROM acct")" = "$total" ]
cluster_psql -c "VACUUM acct"
used=$(cluster_psql -Atc "SELECT used_bytes FROM anker.memory")
echo "arena bytes in use: baseline $base, after churn and VACUUM $used"
[ "$used" -le $((base + 2 * 1024 * 1024)) ]
echo "ok: every sum consistent, no leaked snapshots or memory"
