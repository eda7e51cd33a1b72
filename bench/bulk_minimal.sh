#!/usr/bin/env bash
# Bulk loads under `wal_level = minimal`, heap against anker: COPY of ROWS rows into a table
# created in the same transaction (PostgreSQL skips WAL for its file and syncs it at commit)
# and into a table that already exists (logged as usual). One throwaway cluster; rounds
# alternate the engines ABBA; prints seconds and WAL bytes per load, the means per engine and
# anker/heap. With --a OLD.so --b NEW.so, two builds of anker take the engines' places (the
# cluster restarts with each; the installed anker.so is put back at the end).
#
#   bench/bulk_minimal.sh [--rows N] [--rounds R] [--a OLD.so --b NEW.so]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
. "$BENCH/lib/two_builds.sh"   # (sets A= B=: before the options)
ROWS=1000000; ROUNDS=4
while [ $# -gt 0 ]; do
    case $1 in
        --rows) ROWS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --a) A=$2; shift 2 ;;
        --b) B=$2; shift 2 ;;
        *) sed -n '2,9p' "$0" >&2; exit 2 ;;
    esac
done
if [ -n "$A$B" ]; then
    two_builds_install "$A"
    ENGINES=(A B)
else
    trap cluster_cleanup EXIT
    ENGINES=(heap anker)
fi
export PGOPTIONS="-c client_min_messages=warning"
cluster_start "shared_preload_libraries = 'anker'" "wal_level = minimal" "max_wal_senders = 0" \
    "shared_buffers = '1GB'" "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" \
    "anker.memory_limit = '4GB'" "jit = off" >/dev/null
WORK=$(cluster_workdir)
DATA=$WORK/rows.tsv
cluster_psql -q -c "CREATE EXTENSION anker"
cluster_psql -q -c "COPY (SELECT g, g % 1000, g * 7::bigint, (g % 100000) / 100.0, 'item ' || md5(g::text),
    date '2020-01-01' + g % 1000 FROM generate_series(1, $ROWS) g) TO '$DATA'"
COLUMNS="id int, k int, n bigint, price numeric(12,2), label text, day date"
now() { date +%s.%N; }
load() { # am new|existing -> "seconds wal_bytes"
    local am=$1 how=$2 t0 t1 lsn sql
    cluster_psql -q -c "DROP TABLE IF EXISTS bulk" -c CHECKPOINT
    if [ "$how" = existing ]; then
        cluster_psql -q -c "CREATE TABLE bulk ($COLUMNS) USING $am"
        sql="COPY bulk FROM '$DATA'"
    else
        sql="BEGIN; CREATE TABLE bulk ($COLUMNS) USING $am; COPY bulk FROM '$DATA'; COMMIT;"
    fi
    lsn=$(cluster_psql -Atc "SELECT pg_current_wal_insert_lsn()")
    t0=$(now)
    cluster_psql -q <<<"$sql"
    t1=$(now)
    echo "$(echo "$t1 - $t0" | bc -l) $(cluster_psql -Atc "SELECT pg_current_wal_insert_lsn() - '$lsn'")"
}
engine_am() { case $1 in heap) echo heap ;; *) echo anker ;; esac; }
declare -A secs wal
echo "rows: $ROWS; wal_level = minimal; engines: ${ENGINES[*]}"
for r in $(seq 1 "$ROUNDS"); do
    order=("${ENGINES[@]}")
    [ $((r % 2)) = 0 ] && order=("${ENGINES[1]}" "${ENGINES[0]}")
    for e in "${order[@]}"; do
        if [ -n "$A" ]; then two_builds_restart_with "${!e}"; fi
        for how in new existing; do
            read -r s w < <(load "$(engine_am "$e")" "$how")
            printf 'round %d %-5s %-8s %7.2f s %12d WAL bytes\n' "$r" "$e" "$how" "$s" "$w"
            secs[$e/$how]=$(echo "${secs[$e/$how]:-0} + $s" | bc -l)
            wal[$e/$how]=$(( ${wal[$e/$how]:-0} + w ))
        done
    done
done
for how in new existing; do
    x=${ENGINES[0]}; y=${ENGINES[1]}
    printf '%-8s mean s: %s %.2f, %s %.2f (%s/%s %.3f); WAL bytes: %s %d, %s %d\n' "$how" \
        "$x" "$(echo "${secs[$x/$how]} / $ROUNDS" | bc -l)" "$y" "$(echo "${secs[$y/$how]} / $ROUNDS" | bc -l)" \
        "$y" "$x" "$(echo "${secs[$y/$how]} / ${secs[$x/$how]}" | bc -l)" \
        "$x" $(( ${wal[$x/$how]} / ROUNDS )) "$y" $(( ${wal[$y/$how]} / ROUNDS ))
done
