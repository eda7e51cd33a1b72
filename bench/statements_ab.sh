#!/usr/bin/env bash
# Where one TPC-C transaction type's time goes, statement by statement, heap against anker: one
# throwaway cluster with anker and pg_stat_statements (`track = all`, so the statements inside
# the kit's PL/pgSQL functions count) preloaded, the TPC-C tables USING heap in one database and
# USING anker in another, then ABBA rounds of that transaction type alone (2 clients). Prints,
# per round, the tps and each statement's execution time per transaction (µs), calls and mean
# time (µs).
#
#   bench/statements_ab.sh [--warehouses W] [--duration SEC] [--type payment|neworder|...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; DURATION=20; TYPE=payment
while [ $# -gt 0 ]; do
    case $1 in
        --warehouses) W=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --type) TYPE=$2; shift 2 ;;
        *) sed -n '2,9p' "$0" >&2; exit 2 ;;
    esac
done
[ -f "$BENCH/tpcc/$TYPE.pgbench" ] || { echo "no transaction type $TYPE (bench/tpcc/*.pgbench)" >&2; exit 2; }
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker,pg_stat_statements'" "pg_stat_statements.track = all" \
    "shared_buffers = '2GB'" "synchronous_commit = off" "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" \
    "jit = off" >/dev/null
WORK=$(cluster_workdir)
for am in heap anker; do tpcc_create_db "tpcc_$am" "$am" "$W"; done
cluster_psql -q -c "CREATE EXTENSION pg_stat_statements" -c CHECKPOINT
echo "W=$W, $TYPE alone, $DURATION s rounds; per statement: µs per transaction | calls | mean µs | statement"
for am in heap anker anker heap; do
    cluster_psql -q -c "SELECT pg_stat_statements_reset()" >/dev/null
    out=$(cd "$WORK" && cluster_run "$PG_BINDIR/pgbench" -n -M prepared -c 2 -j 2 -T "$DURATION" \
        -D warehouses="$W" -D uniform=0 -f "$BENCH/tpcc/$TYPE.pgbench" "tpcc_$am" 2>&1)
    xacts=$(echo "$out" | grep -Eo 'transactions actually processed: [0-9]+' | awk '{print $4}')
    echo "== $am: $(echo "$out" | grep -Eo 'tps = [0-9.]+' | head -1), $xacts transactions"
    cluster_psql -At -F ' | ' -c "
        SELECT round((total_exec_time * 1000 / $xacts)::numeric, 1), calls, round(mean_exec_time::numeric * 1000, 1),
               left(regexp_replace(query, '\s+', ' ', 'g'), 100)
          FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
         WHERE d.datname = 'tpcc_$am' ORDER BY total_exec_time DESC LIMIT 12"
done
