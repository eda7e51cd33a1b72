#!/usr/bin/env bash
# What shorter anker/APPEND records would save in real WAL. WAL records are 8-byte aligned,
# so a cut of a few bytes shows only where it takes a record below a multiple of 8. Runs the
# TPC-C mix (2 clients) on an anker database alone, then reads each APPEND record's length
# (pg_walinspect) and prints, per transaction: the records and their bytes, the commonest
# lengths, and the aligned bytes saved if every record were shorter by a sequence number of 3
# or 4 bytes, or by 1..8 bytes flat. (A row change's record leaves its xid out since
# 2026-11-30; before, this script estimated that cut at 54 bytes per transaction.)
#
#   bench/wal_cuts.sh [--warehouses W] [--duration SEC]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; DURATION=20
while [ $# -gt 0 ]; do
    case $1 in
        --warehouses) W=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        *) sed -n '2,10p' "$0" >&2; exit 2 ;;
    esac
done
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
tpcc_mix_args standard
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '2GB'" "synchronous_commit = off" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "jit = off" >/dev/null
WORK=$(cluster_workdir)
tpcc_create_db tpcc_anker anker "$W"
cluster_psql -q -c CHECKPOINT -c "CREATE EXTENSION pg_walinspect"
from=$(cluster_psql -At -c "SELECT pg_current_wal_insert_lsn()")
out=$(cd "$WORK" && cluster_run "$PG_BINDIR/pgbench" -n -M prepared -c 2 -j 2 -T "$DURATION" \
    -D warehouses="$W" -D uniform=0 "${TPCC_MIX_ARGS[@]}" tpcc_anker 2>&1)
xacts=$(echo "$out" | grep -Eo 'transactions actually processed: [0-9]+' | awk '{print $4}')
to=$(cluster_psql -At -c "SELECT pg_current_wal_insert_lsn()")
# (pg_walinspect reads flushed WAL only; the switch flushes)
cluster_psql -At -c "SELECT pg_switch_wal()" >/dev/null
echo "W=$W, $DURATION s: $xacts transactions"
cluster_psql -At -F ' ' <<SQL
CREATE TEMP TABLE r AS
    SELECT record_length AS len
      FROM pg_get_wal_records_info('$from', '$to')
     WHERE resource_manager = 'anker' AND record_type = 'APPEND';
CREATE FUNCTION pg_temp.aligned(n int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT (n + 7) / 8 * 8';
SELECT format('APPEND records per transaction %s, bytes %s (aligned %s)',
              round(count(*)::numeric / $xacts, 2), round(sum(len)::numeric / $xacts),
              round(sum(pg_temp.aligned(len))::numeric / $xacts)) FROM r;
SELECT 'commonest lengths (bytes: share): ' || string_agg(format('%s: %s %%', len, pct), ', ')
  FROM (SELECT len, round(100.0 * count(*) / sum(count(*)) OVER (), 1) AS pct
          FROM r GROUP BY len ORDER BY count(*) DESC LIMIT 8) t;
SELECT format('saved per transaction, %s: %s bytes (%s %% of the APPEND records'' aligned bytes)', cut, saved,
              round(100.0 * saved / (SELECT sum(pg_temp.aligned(len))::numeric / $xacts FROM r), 1))
  FROM (SELECT c.cut, round(sum(pg_temp.aligned(len) - pg_temp.aligned(len - c.seq_bytes))::numeric / $xacts, 1) AS saved, c.ord
          FROM r, (VALUES (1, 'a 3-byte sequence number', 3), (2, 'a 4-byte sequence number', 4)) AS c(ord, cut, seq_bytes)
         GROUP BY c.ord, c.cut
        UNION ALL
        SELECT k || ' bytes flat', round(sum(pg_temp.aligned(len) - pg_temp.aligned(len - k))::numeric / $xacts, 1), 2 + k
          FROM r, generate_series(1, 8) k GROUP BY k) t
 ORDER BY ord;
SQL
