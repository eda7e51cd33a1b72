#!/usr/bin/env bash
# Durability costs, anker against heap in one cluster: the same rows loaded
# into an anker table and a heap table (WAL bytes and relation-file bytes of
# each load), an update pass over a tenth of the rows (WAL bytes), then an
# immediate shutdown (a crash) and a start: time until the server accepts
# connections (crash recovery replays the WAL of both), and the first full
# read of each table afterwards (anker loads its table from the replayed
# fork on first use; heap reads its pages cold from the OS cache).
#
#   bench/recovery.sh [--rows N] [--engines "anker heap"]
#       (default 2,000,000 rows, ~100 bytes a row; --engines anker, or heap,
#       runs one engine alone, so that crash recovery replays its WAL alone)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROWS=2000000
ENGINES="anker heap"
while [ $# -gt 0 ]; do
    case $1 in
        --rows) ROWS=$2; shift 2 ;;
        --engines) ENGINES=$2; shift 2 ;;
        *) sed -n '2,12p' "$0" >&2; exit 2 ;;
    esac
done
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '8GB'" "shared_buffers = '1GB'" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "synchronous_commit = on" "fsync = on" \
    "autovacuum = off" >/dev/null
q() { cluster_psql -Atc "$1"; }
ms() { date +%s%3N; }
q "CREATE EXTENSION anker" >/dev/null
q "CHECKPOINT" >/dev/null
for am in $ENGINES; do
    q "CREATE TABLE r_$am (id int PRIMARY KEY, k int, v bigint, pad text) USING $am" >/dev/null
done
printf '%-6s %10s %12s %12s %12s\n' engine load_ms load_WAL_MB file_MB update_WAL_MB
for am in $ENGINES; do
    lsn=$(q "SELECT pg_current_wal_insert_lsn()")
    t0=$(ms)
    q "INSERT INTO r_$am SELECT g, g % 1000, g, repeat(md5(g::text), 2) FROM generate_series(1, $ROWS) g" >/dev/null
    t1=$(ms)
    load_wal=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn')::bigint")
    lsn=$(q "SELECT pg_current_wal_insert_lsn()")
    q "UPDATE r_$am SET v = v + 1 WHERE id % 10 = 0" >/dev/null
    upd_wal=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn')::bigint")
    file=$(q "SELECT pg_relation_size('r_$am')")
    printf '%-6s %10d %12.1f %12.1f %12.1f\n' "$am" $((t1 - t0)) "$(echo "$load_wal / 1048576" | bc -l)" \
        "$(echo "$file / 1048576" | bc -l)" "$(echo "$upd_wal / 1048576" | bc -l)"
done
declare -A expect
for am in $ENGINES; do expect[$am]=$(q "SELECT sum(v) FROM r_$am"); done
wal_since_ckpt=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::bigint FROM pg_control_checkpoint()")
cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -m immediate -w stop >/dev/null
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
t0=$(ms)
cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 600 start >/dev/null
t1=$(ms)
echo "crash recovery of $(echo "$wal_since_ckpt / 1048576" | bc) MB of WAL ($ENGINES): $((t1 - t0)) ms until the server accepts connections"
for am in $ENGINES; do
    t0=$(ms)
    got=$(q "SELECT sum(v) FROM r_$am")
    t1=$(ms)
    want=${expect[$am]}
    [ "$got" = "$want" ] || { echo "r_$am: sum after recovery $got, before $want"; exit 1; }
    t2=$(ms)
    q "SELECT sum(v) FROM r_$am" >/dev/null
    t3=$(ms)
    echo "r_$am: first read after recovery $((t1 - t0)) ms, second read $((t3 - t2)) ms"
done
grep -E "anker: loaded relation file" "$CLUSTER_LOG" | sed 's/^.*LOG: */server log: /' | tail -n 2
